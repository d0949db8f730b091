// How a large message is cut over the helper lanes of several rails: which lanes take a piece and how big each is.
#pragma once
#include <cstddef>

namespace icn::tcp {

// A helper lane that could take a piece: its rail, its weight (its rail's measured rate per lane) and the bytes it
// still holds (handed to it, not yet acknowledged).
struct SplitCandidate {
  int lane = 0;
  int rail = 0;
  double weight = 0;
  double holds = 0;
};

// Cuts `size` bytes over some of the `n` candidates, given in the order they would finish their share (first
// first), so that every lane kept would finish at the same time (what it still holds and its piece, at its weight;
// with nothing held, pieces in proportion to the weights): a lane behind gets less of the message, which would
// otherwise wait for it. Each piece page-aligned (but the last). At most one piece per `chunk`
// bytes, and no piece under a chunk unless it is the only one. A lane under an eighth of the fastest candidate's
// weight sits the message out (it would add little, and an estimate a little high would make its piece the one the
// message waits for). Otherwise lanes sit out one at a time from the rail with the most lanes in the message (the
// latest of them to finish) until every rail has one: a rail keeps a piece of a message of a few chunks, so a rail
// measured a little slower still carries work (and gets measured) instead of sitting out until its estimate ages.
// Then the lane with the most time's work still queued (what it holds over its weight; the latest in the order
// among equals) sits out, and the last two give the message to the one that would finish all of it first: a
// message of one piece goes to whichever rail is free, not to the one measured a little faster, so back-to-back
// messages of a chunk keep every rail busy. Reorders c[0..k) to the lanes kept, fills sizes[0..k) and returns k
// (at least 1).
size_t splitOverRails(size_t size, size_t chunk, SplitCandidate* c, size_t n, size_t* sizes);

}  // namespace icn::tcp
