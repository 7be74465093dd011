#!/usr/bin/env bash
# The test command's dependencies: one probe each, which proves the thing works (runs it and
# checks what it did), never only that a command ran. `echo 'package require tls' | tclsh` is the
# cautionary tale: tclsh reading standard input reports the error and still exits 0, so that check
# passed on every machine, with or without Tcl's TLS package (issue 53).
#
#   scripts/deps.sh check          probe everything; one line per dependency; exit 1 if any fails
#   scripts/deps.sh install        check; install what failed with apt-get (root), or stop with one
#                                  line naming it and how to install it; probe again after
#   scripts/deps.sh probe NAME...  run the named probes only (exit 1 if any fails)
#   scripts/deps.sh list           NAME PACKAGE WHAT, one dependency a line
#
# scripts/deps-clean-room.sh runs this file in a throwaway Debian root file system and shows each
# probe failing without its package and passing with it; run it before a change here lands.
set -uo pipefail

# name | Debian package | what needs it
DEPS=(
    "python3|python3|free ports and helpers in every script, the memcache workload"
    "pip|python3-pip|pymemcache for the memcache-libs stage"
    "redis-server|redis-server|reference server for differential tests, the suite's --server redis"
    "redis-cli|redis-tools|scripts' readiness checks, replication tests"
    "redis-check-rdb|redis-tools|persistence tests check our RDB files with it"
    "tclsh|tcl|Redis's Tcl suite (8.5 or newer)"
    "tcl-tls|tcl-tls|the suite's --tls runs (Tcl's TLS package 1.6 or newer)"
    "openssl|openssl|certificates for the TLS tests and the suite's --tls runs"
    "memcached|memcached|memcache differential tests and the memcache-libs stage"
    "memccapable|libmemcached-tools|the memccapable stage (libmemcached's conformance tests)"
    "node|nodejs|the libraries stage (bee-queue, redlock)"
    "npm|npm|the libraries stage installs its pinned packages with npm ci"
    "pgrep|procps|the suite's runner finds stray servers with it"
    "systemd-analyze|systemd|the unit-file stage verifies dist/systemd/damselfly.service with it"
)

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

# A Tcl script run from a file: tclsh exits non-zero on an uncaught error there (unlike from
# standard input), and the scripts below exit with an explicit status anyway.
tcl_exit() { # script
    printf '%s\n' "$1" > "$TMP/probe.tcl"
    tclsh "$TMP/probe.tcl" </dev/null
}

probe() { # name -> status 0 when the dependency works; one-line reason on stdout otherwise
    case "$1" in
        python3)
            python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])' \
                2>/dev/null | grep -qE '^[0-9]+$' || { echo "python3 cannot bind a loopback socket"; return 1; } ;;
        pip)
            python3 -m pip --version 2>/dev/null | grep -q '^pip ' || { echo "python3 -m pip does not run"; return 1; } ;;
        redis-server)
            redis-server --version 2>/dev/null | grep -q 'Redis server v=7\.' ||
                { echo "redis-server 7.x does not run (--version)"; return 1; } ;;
        redis-cli)
            redis-cli --version 2>/dev/null | grep -q '^redis-cli 7\.' ||
                { echo "redis-cli 7.x does not run (--version)"; return 1; } ;;
        redis-check-rdb)
            # It must check a file: an empty RDB (header, EOF, checksum) written by hand.
            printf 'REDIS0010\xff\x00\x00\x00\x00\x00\x00\x00\x00' > "$TMP/empty.rdb"
            redis-check-rdb "$TMP/empty.rdb" 2>&1 | grep -q 'RDB looks OK' ||
                { echo "redis-check-rdb does not accept an empty RDB file"; return 1; } ;;
        tclsh)
            command -v tclsh >/dev/null && tcl_exit 'exit [expr {[package vsatisfies [info patchlevel] 8.5-] ? 0 : 1}]' \
                2>/dev/null || { echo "tclsh 8.5 or newer does not run"; return 1; } ;;
        tcl-tls)
            command -v tclsh >/dev/null &&
                tcl_exit 'if {[catch {package require tls} v]} { exit 1 }; exit [expr {[package vsatisfies $v 1.6-] ? 0 : 2}]' \
                2>/dev/null || { echo "Tcl cannot load its TLS package 1.6+ (package require tls)"; return 1; } ;;
        openssl)
            openssl req -x509 -newkey rsa:2048 -nodes -subj /CN=probe -days 1 \
                -keyout "$TMP/key.pem" -out "$TMP/cert.pem" >/dev/null 2>&1 &&
                openssl x509 -in "$TMP/cert.pem" -noout -subject 2>/dev/null | grep -q probe ||
                { echo "openssl cannot make a self-signed certificate"; return 1; } ;;
        memcached)
            memcached --version 2>/dev/null | grep -q '^memcached 1\.' ||
                { echo "memcached 1.x does not run (--version)"; return 1; } ;;
        memccapable)
            # --help lists the tests it knows; the stage relies on its ASCII-mode flag (-a).
            memccapable --help 2>&1 | grep -q -- '-a' ||
                { echo "memccapable does not run (--help)"; return 1; } ;;
        node)
            [[ $(node -e 'console.log(Number(process.versions.node.split(".")[0]) >= 16 ? "ok" : "old")' 2>/dev/null) == ok ]] ||
                { echo "node 16 or newer does not run"; return 1; } ;;
        npm)
            npm --version 2>/dev/null | grep -qE '^[0-9]+\.' || { echo "npm does not run (--version)"; return 1; } ;;
        pgrep)
            pgrep -x -- "$(ps -o comm= -p $$ 2>/dev/null)" >/dev/null 2>&1 ||
                { echo "pgrep cannot find this very shell"; return 1; } ;;
        systemd-analyze)
            # verify says nothing about a valid unit, and reports an invalid value (a warning: it
            # still exits 0, so scripts/check-unit.sh fails on any output).
            printf '[Service]\nExecStart=/bin/true\n' > "$TMP/ok.service"
            printf '[Service]\nExecStart=/bin/true\nType=no-such-type\n' > "$TMP/bad.service"
            [[ -z $(systemd-analyze verify --man=no "$TMP/ok.service" 2>&1) ]] &&
                systemd-analyze verify --man=no "$TMP/bad.service" 2>&1 | grep -q 'no-such-type' ||
                { echo "systemd-analyze verify does not check a unit file"; return 1; } ;;
        *) echo "no probe named $1"; return 1 ;;
    esac
}

field() { # entry index
    local IFS='|'
    # shellcheck disable=SC2206
    local f=($1)
    echo "${f[$2]}"
}

# Probes the given names (all when none), prints one line each, sets MISSING to the failed ones.
MISSING=()
check() {
    MISSING=()
    local e name why
    for e in "${DEPS[@]}"; do
        name=$(field "$e" 0)
        if [[ $# -gt 0 && " $* " != *" $name "* ]]; then continue; fi
        if why=$(probe "$name"); then
            printf '  ok       %-16s (%s)\n' "$name" "$(field "$e" 1)"
        else
            printf '  MISSING  %-16s (%s): %s\n' "$name" "$(field "$e" 1)" "$why"
            MISSING+=("$name")
        fi
    done
    [[ ${#MISSING[@]} -eq 0 ]]
}

packages_of() { # names... -> unique Debian packages
    local n e out=()
    for n in "$@"; do
        for e in "${DEPS[@]}"; do
            [[ $(field "$e" 0) == "$n" ]] || continue
            local p
            p=$(field "$e" 1)
            [[ " ${out[*]-} " == *" $p "* ]] || out+=("$p")
        done
    done
    echo "${out[*]}"
}

install() {
    check && { echo "deps: all present"; return 0; }
    local pkgs
    pkgs=$(packages_of "${MISSING[@]}")
    if [[ $(id -u) -ne 0 ]]; then
        echo "deps: missing ${MISSING[*]}, and not root to install them: run 'sudo apt-get install -y $pkgs', then run this again" >&2
        return 1
    fi
    if ! command -v apt-get >/dev/null; then
        echo "deps: missing ${MISSING[*]}, and no apt-get here: install the Debian packages $pkgs (or their equivalents), then run this again" >&2
        return 1
    fi
    echo "deps: installing $pkgs"
    export DEBIAN_FRONTEND=noninteractive
    # shellcheck disable=SC2086
    if ! { apt-get update -qq && apt-get install -y -qq --no-install-recommends $pkgs; } >"$TMP/apt.log" 2>&1; then
        tail -n 20 "$TMP/apt.log" >&2
        echo "deps: 'apt-get install -y $pkgs' failed (above); install them by hand, then run this again" >&2
        return 1
    fi
    echo "deps: probing again after the install"
    if ! check; then
        echo "deps: still missing after installing their packages: ${MISSING[*]} (see the reasons above)" >&2
        return 1
    fi
    echo "deps: all present"
}

case "${1:-check}" in
    check) check ;;
    install) install ;;
    probe) shift; check "$@" ;;
    list) for e in "${DEPS[@]}"; do printf '%s %s %s\n' "$(field "$e" 0)" "$(field "$e" 1)" "$(field "$e" 2)"; done ;;
    -h|--help) sed -n '2,/^set -uo pipefail/{/^set -uo/d;s/^# \{0,1\}//;p}' "$0" ;;
    *) echo "deps: unknown command '$1' (check, install, probe NAME..., list)" >&2; exit 2 ;;
esac
