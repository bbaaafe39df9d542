#!/usr/bin/env bash
# Makes the base images deploy/Dockerfile starts FROM,
# docker.io/library/debian:bookworm and docker.io/library/debian:bookworm-slim,
# from Debian's own packages with debootstrap, for machines that cannot pull
# from a registry (podman resolves the fully qualified names to these local
# images). With network access to Docker Hub you do not need this.
#
#   sudo deploy/debian-base.sh [MIRROR]   # default: the host's first apt URI
#
# Needs root, debootstrap and podman (or docker: SHARDMAP_ENGINE=docker).
# Images that exist already are kept. "bookworm" is debootstrap's minbase
# with apt's caches emptied; "bookworm-slim" also drops documentation, man
# pages and translations and keeps dpkg from installing them later, as
# Debian's official slim images do.
set -euo pipefail
engine=${SHARDMAP_ENGINE:-podman}
full=docker.io/library/debian:bookworm
slim=docker.io/library/debian:bookworm-slim

exists() { "$engine" image inspect "$1" >/dev/null 2>&1; }
# import NAME: the root file system as image NAME.
import() {
  tar -C "$root" -c . | "$engine" import - "$1" >"$root.log" 2>&1 || {
    cat "$root.log" >&2
    exit 1
  }
}
if exists "$full" && exists "$slim"; then
  echo "debian-base: $full and $slim exist" >&2
  exit 0
fi

mirror=${1:-}
if [[ -z "$mirror" ]]; then
  mirror=$(grep -hoE '^URIs: *[^ ]+' /etc/apt/sources.list.d/*.sources 2>/dev/null |
           head -1 | awk '{print $2}')
  [[ -n "$mirror" ]] ||
    mirror=$(awk '$1 == "deb" {print $2; exit}' /etc/apt/sources.list 2>/dev/null)
  mirror=${mirror:-http://deb.debian.org/debian}
fi

root=$(mktemp -d)
trap 'rm -rf "$root" "$root.log"' EXIT
echo "debian-base: debootstrap bookworm from $mirror" >&2
debootstrap --variant=minbase bookworm "$root" "$mirror" >"$root.log" 2>&1 || {
  tail -20 "$root.log" >&2
  exit 1
}
rm -f "$root.log"
rm -rf "$root"/var/cache/apt/*.bin "$root"/var/cache/apt/archives/*.deb \
  "$root"/var/lib/apt/lists/* "$root"/var/log/*.log "$root"/var/log/apt/*
exists "$full" || import "$full"

cat >"$root/etc/dpkg/dpkg.cfg.d/slim" <<'EOF'
# No documentation, man pages or translations (as in debian:*-slim).
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/locale/*
path-exclude /usr/share/lintian/*
EOF
find "$root/usr/share/doc" -mindepth 1 -not -name copyright -not -type d -delete
rm -rf "$root"/usr/share/man/* "$root"/usr/share/info/* \
  "$root"/usr/share/locale/* "$root"/usr/share/lintian/*
exists "$slim" || import "$slim"
echo "debian-base: made $full and $slim" >&2
