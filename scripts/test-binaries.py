#!/usr/bin/env python3
"""Prints the paths of test binaries that `cargo test --no-run --message-format=json` built.

Usage: cargo test --workspace --no-run --message-format=json |
           scripts/test-binaries.py PACKAGE TARGET...

TARGET is `lib` for the package's unit tests or the name of one of its integration tests
(`model` for tests/model.rs). Every requested target must be found, or the script fails
naming the missing ones, so a renamed test cannot silently drop out of the memcheck run.
"""

import json
import sys


def package_name(package_id: str) -> str:
    """The package name in a cargo package id: "path+file:///x/crates/elastree#0.1.0",
    "path+file:///x/dir#name@0.1.0", or the older "name 0.1.0 (path+file:///x)"."""
    if " " in package_id:
        return package_id.split(" ")[0]
    location, _, fragment = package_id.rpartition("#")
    if "@" in fragment:
        return fragment.split("@")[0]
    return location.rstrip("/").rsplit("/", 1)[-1]


def main() -> int:
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    package, wanted = sys.argv[1], sys.argv[2:]
    found = {}
    for line in sys.stdin:
        try:
            message = json.loads(line)
        except json.JSONDecodeError:
            continue
        if message.get("reason") != "compiler-artifact" or not message.get("executable"):
            continue
        if not message.get("profile", {}).get("test"):
            continue
        target = message["target"]
        kinds = target.get("kind", [])
        if package_name(message.get("package_id", "")) != package:
            continue
        if "lib" in kinds:
            key = "lib"
        elif "test" in kinds:
            key = target["name"]
        else:
            continue
        if key in wanted:
            found[key] = message["executable"]
    missing = [w for w in wanted if w not in found]
    if missing:
        print(f"test-binaries: no test binary for {package}: {missing}", file=sys.stderr)
        return 1
    print("\n".join(found[w] for w in wanted))
    return 0


if __name__ == "__main__":
    sys.exit(main())
