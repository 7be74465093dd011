#!/usr/bin/env python3
"""Generates crates/core/src/commands/key_flags_table.rs from Redis's command JSON files.

Usage: python3 scripts/gen-key-flags.py [REDIS_SRC_DIR]

REDIS_SRC_DIR is a Redis source tree (the one holding src/commands/*.json and src/version.h);
it defaults to .redis-tests/src. The table maps every command's fullname ("get", "config|get")
to its key specs' access flags, in the JSON's key_specs order (see commands/key_flags.rs).
Standard library only; the output is rustfmt-clean.
"""

import glob
import json
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "crates", "core", "src", "commands", "key_flags_table.rs")

# JSON flag name -> Rust constant in commands/key_flags.rs (Redis's CMD_KEY_* order).
FLAGS = [
    "RO",
    "RW",
    "OW",
    "RM",
    "ACCESS",
    "UPDATE",
    "INSERT",
    "DELETE",
    "NOT_KEY",
    "INCOMPLETE",
    "VARIABLE_FLAGS",
]
# Not a Redis flag: marks a spec whose begin_search or find_keys is "unknown" (SORT's BY/GET
# and STORE keys).
UNKNOWN = "UNKNOWN"


def redis_version(src):
    with open(os.path.join(src, "src", "version.h")) as f:
        m = re.search(r'#define REDIS_VERSION "([^"]+)"', f.read())
    if not m:
        sys.exit("no REDIS_VERSION in src/version.h")
    return m.group(1)


def spec_flags(spec, where):
    names = []
    for flag in spec.get("flags", []):
        if flag not in FLAGS:
            sys.exit(f"{where}: unknown key spec flag {flag!r}")
        names.append(flag)
    names.sort(key=FLAGS.index)
    if "unknown" in spec.get("begin_search", {}) or "unknown" in spec.get("find_keys", {}):
        names.append(UNKNOWN)
    return " | ".join(names) if names else "0"


def commands(src):
    table = {}
    for path in sorted(glob.glob(os.path.join(src, "src", "commands", "*.json"))):
        with open(path) as f:
            doc = json.load(f)
        for name, cmd in doc.items():
            full = name.lower()
            if "container" in cmd:
                full = cmd["container"].lower() + "|" + full
            if full in table:
                sys.exit(f"{path}: {full} declared twice")
            where = f"{os.path.basename(path)} ({full})"
            table[full] = [spec_flags(s, where) for s in cmd.get("key_specs", [])]
    if not table:
        sys.exit(f"no command JSON files under {src}/src/commands")
    return table


def line(full, specs):
    text = f'    ("{full}", &[{", ".join(specs)}]),'
    if len(text) > 100:
        sys.exit(f"{full}: the table line would not be rustfmt-clean ({len(text)} chars)")
    return text


def use_block(names):
    """The `use super::{...};` of the flags used, as rustfmt writes it."""
    names = sorted(names)
    one = f"use super::{{{', '.join(names)}}};"
    if len(one) <= 100:
        return [one]
    lines, cur = [], "   "
    for n in names:
        if len(cur) + 1 + len(n) + 1 > 100:
            lines.append(cur)
            cur = "   "
        cur += f" {n},"
    return ["use super::{", *lines, cur, "};"]


def main():
    src = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, ".redis-tests", "src")
    version = redis_version(src)
    table = commands(src)
    used = sorted(
        {f for specs in table.values() for s in specs for f in s.split(" | ") if f != "0"},
        key=lambda f: FLAGS.index(f) if f in FLAGS else len(FLAGS),
    )
    out = [
        f"//! Generated from Redis {version}'s src/commands/*.json by scripts/gen-key-flags.py:",
        "//! do not edit. Regenerate with `python3 scripts/gen-key-flags.py [REDIS_SRC_DIR]`",
        "//! (default .redis-tests/src).",
        "//!",
        "//! Every Redis command's fullname (\"get\", \"config|get\") with its key specs' access flags",
        "//! (`key_flags::*`), in the order of the JSON's `key_specs`, sorted by name.",
        "",
        *use_block(used),
        "",
        f"/// Redis {version}'s key spec flags, by command fullname (sorted). One line a command:",
        "/// rustfmt would break the longer ones.",
        "#[rustfmt::skip]",
        "pub static TABLE: &[(&str, &[u16])] = &[",
    ]
    out += [line(full, table[full]) for full in sorted(table)]
    out += ["];", ""]
    with open(OUT, "w") as f:
        f.write("\n".join(out))
    print(f"wrote {os.path.relpath(OUT, ROOT)}: {len(table)} commands (Redis {version})")


if __name__ == "__main__":
    main()
