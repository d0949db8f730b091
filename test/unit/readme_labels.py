#!/usr/bin/env python3
"""The README's ctest labels are the labels the build has.

Usage: readme_labels.py README SOURCE_DIR CTEST BUILD_DIR

Fails when a gtest_discover_tests call passes several labels in one argument (all but the first are lost), when a
label ctest knows is missing from the README's Tests section, when the README names a label no
CMakeLists declares, when a label selects no test, or when one label is part of another (ctest -L takes a
regular expression, so `-L unit` would also select a label such as "unit-slow"). A README label absent from this
build is fine when some CMakeLists declares it (labels of optional parts: fuzz, vm, ib).
"""
import pathlib
import re
import subprocess
import sys


def readme_labels(readme):
    text = pathlib.Path(readme).read_text()
    m = re.search(r"^## Tests\n(.*?)(?=^## )", text, re.S | re.M)
    if not m:
        sys.exit(f"{readme}: no '## Tests' section")
    return set(re.findall(r"-L ([A-Za-z0-9_-]+)", m.group(1)))


def ctest_labels(ctest, build):
    out = subprocess.run([ctest, "--test-dir", build, "--print-labels"], capture_output=True, text=True, check=True)
    lines = out.stdout.splitlines()
    if not any(l.strip() == "All Labels:" for l in lines):
        sys.exit("ctest --print-labels printed no label list:\n" + out.stdout)
    return {l.strip() for l in lines[[l.strip() for l in lines].index("All Labels:") + 1:] if l.strip()}


def declared_labels(source):
    """Every label a CMakeLists under test/ declares (any configuration)."""
    found = set()
    for f in pathlib.Path(source, "test").rglob("CMakeLists.txt"):
        text = f.read_text()
        for m in re.finditer(r'LABELS\s+("([^"]*)"|([A-Za-z0-9_;-]+))', text):
            found.update(x for x in (m.group(2) or m.group(3) or "").split(";") if x and "$" not in x)
        for m in re.finditer(r"icn_gtest_labels\(\S+\s+([^)]*)\)", text):
            found.update(m.group(1).split())
        for m in re.finditer(r"PROPERTY LABELS ([A-Za-z0-9_-]+)", text):
            found.add(m.group(1))
        for m in re.finditer(r"icn_cross_host\(\S+\s+([A-Za-z0-9_-]+)\s", text):
            found.add(m.group(1))
    return found


def split_gtest_labels(source):
    """gtest_discover_tests(... PROPERTIES LABELS "a;b") keeps only "a" (the list is split into arguments): such
    tests silently drop out of `ctest -L b`. icn_gtest_labels (test/CMakeLists.txt) sets several labels."""
    bad = []
    for f in sorted(pathlib.Path(source, "test").rglob("CMakeLists.txt")):
        for m in re.finditer(r"gtest_discover_tests\(([^)]*)\)", f.read_text()):
            if re.search(r'LABELS\s+"[^"]*;', m.group(1)):
                bad.append(f"{f.relative_to(source)}: gtest_discover_tests({m.group(1).split()[0]} ...) passes several "
                           "LABELS in one argument: all but the first are lost (use icn_gtest_labels)")
    return bad


def selected(ctest, build, label):
    out = subprocess.run([ctest, "--test-dir", build, "-N", "-L", f"^{label}$"], capture_output=True, text=True,
                         check=True)
    m = re.search(r"Total Tests: (\d+)", out.stdout)
    return int(m.group(1)) if m else 0


def main():
    readme, source, ctest, build = sys.argv[1:5]
    documented = readme_labels(readme)
    have = ctest_labels(ctest, build)
    declared = declared_labels(source)
    errors = split_gtest_labels(source)
    for l in sorted(have - documented):
        errors.append(f"label '{l}' exists in ctest but the README's Tests section does not list it")
    for l in sorted(documented - have - declared):
        errors.append(f"the README lists '-L {l}' but no CMakeLists under test/ declares that label")
    for a in sorted(have | documented):
        for b in sorted(have | documented):
            if a != b and a in b:
                errors.append(f"label '{a}' is part of label '{b}': `ctest -L {a}` selects both")
    for l in sorted(have):
        if selected(ctest, build, l) == 0:
            errors.append(f"label '{l}' selects no test")
    for e in errors:
        print("FAIL:", e)
    print(f"README labels: {' '.join(sorted(documented))}")
    print(f"ctest labels:  {' '.join(sorted(have))}")
    sys.exit(1 if errors else 0)


if __name__ == "__main__":
    main()
