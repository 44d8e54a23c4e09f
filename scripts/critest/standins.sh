#!/usr/bin/env bash
# standins.sh OUTDIR — prepare the files critest's stand-in images are built from:
#   OUTDIR/rootfs      busybox root: Debian's dynamically linked busybox (not the
#                      SH_STANDALONE static one: `pgrep sleep` must see a real sleep process)
#                      with every applet as a hard link, host pgrep and ipcs with their
#                      libraries, users nobody/www-data/uid 1000, group 50000, /www/index.html
#   OUTDIR/nonewprivs  setuid probe (static Go)
#   OUTDIR/pause       pause (static Go)
#   OUTDIR/webserver   nginx/httpd stand-in (static Go)
# Idempotent: OUTDIR/.done marks a complete result; a partial OUTDIR is rebuilt.
set -euo pipefail
OUT=${1:?usage: standins.sh OUTDIR}
REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
[[ -f $OUT/.done ]] && exit 0
rm -rf "$OUT"; mkdir -p "$OUT"
log() { printf '[standins] %s\n' "$*" >&2; }

need_pkgs=()
[[ -x /usr/bin/pgrep ]] || need_pkgs+=(procps)
[[ -x /usr/bin/ipcs ]] || need_pkgs+=(util-linux)
if ((${#need_pkgs[@]})); then
  log "installing ${need_pkgs[*]}"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_pkgs[@]}" >/dev/null
fi

tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
log "fetching Debian busybox (dynamic)"
if ! (cd "$tmp" && apt-get download busybox >/dev/null 2>&1); then
  apt-get update -qq
  (cd "$tmp" && apt-get download busybox >/dev/null 2>&1) || { echo "standins.sh: apt-get download busybox failed: check apt sources" >&2; exit 1; }
fi
dpkg-deb -x "$tmp"/busybox_*.deb "$tmp/deb"

R=$OUT/rootfs
mkdir -p "$R"/{bin,sbin,usr/bin,usr/sbin,etc,tmp,www,root,home/user1000,var/www,proc,sys,dev}
chmod 1777 "$R/tmp"
cp "$tmp/deb/bin/busybox" "$R/bin/busybox"
for a in $("$R/bin/busybox" --list-full); do
  [[ $a == bin/busybox ]] && continue
  mkdir -p "$R/$(dirname "$a")"
  [[ -e $R/$a ]] || ln "$R/bin/busybox" "$R/$a"
done
cp /usr/bin/pgrep /usr/bin/ipcs "$R/usr/bin/"
# Shared libraries of every dynamic binary, at their host paths.
for bin in "$R/bin/busybox" /usr/bin/pgrep /usr/bin/ipcs; do
  ldd "$bin" | awk '{for(i=1;i<=NF;i++) if ($i ~ /^\//) print $i}' | while read -r lib; do
    mkdir -p "$R/$(dirname "$lib")"
    cp -L "$lib" "$R/$lib"
  done
done
# /lib64 -> the loader path must exist as the binaries ask for it.
cat > "$R/etc/passwd" <<'P'
root:x:0:0:root:/root:/bin/sh
www-data:x:33:33:www-data:/var/www:/bin/sh
user1000:x:1000:1000:user1000:/home/user1000:/bin/sh
nobody:x:65534:65534:nobody:/nonexistent:/bin/false
P
cat > "$R/etc/group" <<'G'
root:x:0:
www-data:x:33:
user1000:x:1000:
group50000:x:50000:user1000
nogroup:x:65534:
G
echo '<html><body><h1>Welcome to nginx!</h1></body></html>' > "$R/www/index.html"
chown -R 0:0 "$R"; chown 1000:1000 "$R/home/user1000"

log "building nonewprivs, pause and webserver (static)"
(cd "$REPO_ROOT" && CGO_ENABLED=0 go build -o "$OUT/nonewprivs" ./scripts/critest/nonewprivs \
  && CGO_ENABLED=0 go build -o "$OUT/pause" ./scripts/critest/pause \
  && CGO_ENABLED=0 go build -o "$OUT/webserver" ./scripts/critest/webserver)
touch "$OUT/.done"
