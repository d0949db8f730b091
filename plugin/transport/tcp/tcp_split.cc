#include "transport/tcp/tcp_split.h"

#include <algorithm>

namespace icn::tcp {
namespace {

// Removes candidate k, keeping the others' order.
void drop(SplitCandidate* c, size_t* n, size_t k) {
  for (size_t i = k; i + 1 < *n; i++) c[i] = c[i + 1];
  (*n)--;
}

// The candidate to sit out next from `size` bytes: the latest to finish of the rail with the most lanes in the
// message; where every rail has one, the one with the most time's work queued; of the last two, the one that would
// finish the whole message later (ties: the later in the order).
size_t nextToSitOut(const SplitCandidate* c, size_t n, size_t size) {
  size_t pick = n - 1;
  int most = 1;
  for (size_t k = n; k-- > 0;) {
    int onRail = 0;
    for (size_t i = 0; i < n; i++) onRail += c[i].rail == c[k].rail;
    if (onRail > most) {
      most = onRail;
      pick = k;
    }
  }
  if (most > 1) return pick;
  const double whole = n == 2 ? static_cast<double>(size) : 0.0;
  auto queued = [&](size_t k) { return (c[k].holds + whole) / std::max(c[k].weight, 1e-9); };
  for (size_t k = n; k-- > 0;)
    if (queued(k) > queued(pick)) pick = k;
  return pick;
}

double weightOf(const SplitCandidate* c, size_t n) {
  double total = 0;
  for (size_t k = 0; k < n; k++) total += c[k].weight;
  return total;
}

// When every kept lane would finish if each were to take its piece at once: (size + the bytes they all still hold)
// over their weights. A lane's piece is then that time at its weight, less the bytes it still holds (without holds,
// pieces in proportion to the weights).
double finishTogether(const SplitCandidate* c, size_t n, size_t size) {
  double holds = 0;
  for (size_t i = 0; i < n; i++) holds += c[i].holds;
  return (static_cast<double>(size) + holds) / weightOf(c, n);
}

double pieceOf(const SplitCandidate& c, double t) { return t * c.weight - c.holds; }

}  // namespace

size_t splitOverRails(size_t size, size_t chunk, SplitCandidate* c, size_t n, size_t* sizes) {
  n = std::max<size_t>(n, 1);
  double fastest = 0;
  for (size_t k = 0; k < n; k++) fastest = std::max(fastest, c[k].weight);
  for (size_t k = n; k-- > 0 && n > 1;)
    if (c[k].weight < fastest / 8) drop(c, &n, k);
  const size_t most = std::clamp<size_t>(size / std::max<size_t>(chunk, 1), 1, n);
  while (n > 1) {
    const double t = finishTogether(c, n, size);
    double least = pieceOf(c[0], t);
    for (size_t k = 1; k < n; k++) least = std::min(least, pieceOf(c[k], t));
    if (n <= most && least >= static_cast<double>(chunk)) break;
    drop(c, &n, nextToSitOut(c, n, size));
  }
  const double t = finishTogether(c, n, size);
  size_t given = 0;
  for (size_t k = 0; k + 1 < n; k++) {
    // Page-sized pieces: each piece's start stays page-aligned when the message's is.
    sizes[k] = static_cast<size_t>(pieceOf(c[k], t)) & ~size_t{4095};
    given += sizes[k];
  }
  sizes[n - 1] = size - given;
  return n;
}

}  // namespace icn::tcp
