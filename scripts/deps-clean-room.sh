#!/usr/bin/env bash
# Checks the test command's set-up path (scripts/deps.sh) where nothing was installed by hand: a
# throwaway Debian root file system (mmdebstrap, minbase: apt and the essential packages only) in
# a temporary directory, entered with chroot. Run it, as root, before a change to scripts/deps.sh
# or the deps stage lands:
#
#   sudo ./scripts/deps-clean-room.sh          (a few minutes: it downloads a minimal Debian)
#
# What it shows, failing loudly at the first surprise:
#   1. `deps.sh check` in the bare root: every probe fails (nothing is there yet);
#   2. `deps.sh install` as an unprivileged user: stops at once, one line naming what is missing
#      and the apt-get command that installs it;
#   3. `deps.sh install` as root: installs everything, and every probe then passes;
#   4. for each dependency in turn: its package (for a command, the one that owns it) removed
#      with dpkg --force-depends, its own probe fails; reinstalled, it passes again.
# The apt sources and options are the host's own (the same mirror, proxy and date checks).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
say() { echo "clean-room: $*"; }
fail() { echo "clean-room: FAILED: $*" >&2; exit 1; }

[[ $(id -u) -eq 0 ]] || fail "needs root (mmdebstrap and chroot)"
. /etc/os-release
SUITE=${VERSION_CODENAME:-bookworm}
if ! command -v mmdebstrap >/dev/null; then
    say "installing mmdebstrap"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends mmdebstrap >/dev/null ||
        { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends mmdebstrap >/dev/null; } ||
        fail "cannot install mmdebstrap"
fi

DIR=$(mktemp -d /tmp/damselfly-clean-room.XXXXXX)
cleanup() {
    for m in "$DIR/proc" "$DIR/dev"; do mountpoint -q "$m" && umount -l "$m"; done
    rm -rf --one-file-system "$DIR"
}
trap cleanup EXIT

# The host's sources (deb822 or one-line) and apt options travel into the new root.
sources=()
for f in /etc/apt/sources.list.d/*.sources /etc/apt/sources.list.d/*.list /etc/apt/sources.list; do
    [[ -s $f ]] && grep -qE '^(deb |Types:.*\bdeb\b)' "$f" && sources+=("$f")
done
[[ ${#sources[@]} -gt 0 ]] || fail "no apt sources on the host"
aptopts=()
for f in /etc/apt/apt.conf.d/*; do
    grep -qiE 'proxy|Check-Valid-Until|Check-Date' "$f" 2>/dev/null && aptopts+=(--aptopt="$f")
done
say "making a minimal $SUITE root in $DIR"
t0=$(date +%s)
mmdebstrap --quiet --mode=root --variant=minbase "${aptopts[@]}" "$SUITE" "$DIR" "${sources[@]}" ||
    fail "mmdebstrap failed"
say "root made in $(( $(date +%s) - t0 ))s"
cp /etc/resolv.conf "$DIR/etc/resolv.conf" 2>/dev/null || true
mount -t proc proc "$DIR/proc"
mount --bind /dev "$DIR/dev"
install -m 755 "$ROOT/scripts/deps.sh" "$DIR/deps.sh"
in_root() { chroot "$DIR" /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root "$@"; }

mapfile -t DEPS < <(in_root /deps.sh list)
[[ ${#DEPS[@]} -gt 0 ]] || fail "deps.sh list printed nothing"

say "1. every probe fails in the bare root"
out=$(in_root /deps.sh check) && fail "deps.sh check passed in a bare root:"$'\n'"$out"
echo "$out"
for e in "${DEPS[@]}"; do
    name=${e%% *}
    grep -qE "^  MISSING  $name " <<<"$out" || fail "probe '$name' did not fail in the bare root"
done

say "2. not root: stops at once with one line"
set +e
out=$(in_root /usr/sbin/runuser -u nobody -- /deps.sh install 2>&1 >/dev/null)
rc=$?
set -e
[[ $rc -ne 0 ]] || fail "deps.sh install as nobody exited 0"
echo "$out"
[[ $(wc -l <<<"$out") -eq 1 ]] || fail "expected one line on standard error"
grep -q "not root" <<<"$out" && grep -q "apt-get install -y" <<<"$out" || fail "the line does not say how to install"

say "3. root: installs everything, then every probe passes"
t0=$(date +%s)
in_root /deps.sh install || fail "deps.sh install as root failed"
in_root /deps.sh check >/dev/null || fail "deps.sh check fails after the install"
say "installed in $(( $(date +%s) - t0 ))s"

say "4. each probe fails without its package and passes with it"
for e in "${DEPS[@]}"; do
    read -r name pkg _ <<<"$e"
    # A command's probe loses the package that owns the command (python3's is python3-minimal,
    # not python3); a library's (tcl-tls, pip) the package deps.sh installs.
    if path=$(in_root sh -c "command -v '$name'"); then
        pkg=$(in_root dpkg -S "$path" | head -1 | cut -d: -f1)
    fi
    in_root dpkg --remove --force-depends --force-remove-essential "$pkg" >/dev/null 2>&1 ||
        fail "cannot remove $pkg"
    if why=$(in_root /deps.sh probe "$name"); then
        fail "probe '$name' passes with $pkg removed"
    fi
    in_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$pkg" >/dev/null 2>&1 ||
        fail "cannot reinstall $pkg"
    in_root /deps.sh probe "$name" >/dev/null || fail "probe '$name' fails after reinstalling $pkg"
    printf '  %-16s without %-20s %s\n' "$name" "$pkg:" "$(sed -E 's/^ +MISSING +//' <<<"$why")"
done
in_root /deps.sh check >/dev/null || fail "deps.sh check fails at the end"
say "OK: every probe fails without its dependency, installs work as root, and non-root stops with one line"
