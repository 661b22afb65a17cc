#!/usr/bin/env bash
# Obtain the exact Slurm source tree of one supported release and print its path.
#
#   slurm-headers/fetch-slurm.sh 22.05.8   # Debian 12's source package, Debian patches applied
#   slurm-headers/fetch-slurm.sh 24.11.5   # the upstream tarball from Debian 13's source archive
#
# What to fetch for a release (Debian source package, the upstream tarball's SHA-256) is its
# line in slurm-headers/releases.tsv. Any other supported release (25.05.8, 25.11.7, 26.05.3,
# ...) has no source a package registry serves: this script then prints the tree cached under the same path if a site put it there
# (unpacked, with config.h and slurm/slurm_version.h as below), and otherwise says how to
# provide one. It never downloads such a release.
#
# Slurm loads a plugin only if it was built for the exact major.minor.micro release, so the
# plugin is compiled against the tree of the release it will run in. A site with its own
# (patched) tree skips this script and sets SLURM_SRC_DIR for cargo instead.
#
# Trees are cached by version under ${GPUTOPO_CACHE:-/var/cache/gputopo}/src/slurm-<version>,
# outside the checkout; nothing from them is ever committed. The tree is left unconfigured:
# bindgen needs only the headers, so this script adds the two files configure would generate
# for them (an empty config.h and slurm/slurm_version.h from META). Building Slurm itself
# (contrib/slurm-install.sh) works on a copy.
set -euo pipefail

ver=${1:?usage: fetch-slurm.sh <version> (a release of slurm-headers/releases.tsv)}
cache=${GPUTOPO_CACHE:-/var/cache/gputopo}/src
dest=$cache/slurm-$ver
. "$(dirname "$0")/../contrib/lib.sh"

# debver: Debian 12's source package (its patches are applied); empty: the upstream tarball
# alone (Debian 13's .dsc is not served next to it). orig_sha256 pins the upstream tarball.
debver=$(release_field "$ver" 5) orig_sha256=$(release_field "$ver" 6)
case $ver in
  [0-9]*.[0-9]*.[0-9]*) ;;
  *) echo "fetch-slurm.sh: '$ver' is not a Slurm release (MAJOR.MINOR.MICRO)" >&2; exit 2 ;;
esac
if [ -z "$orig_sha256" ]; then
  if [ -f "$dest/.gputopo-ready" ]; then echo "$dest"; exit 0; fi
  cat >&2 <<EOM
fetch-slurm.sh: no package registry serves the source of Slurm $ver; use your site's own tree:
  export SLURM_SRC_DIR=/path/to/slurm-$ver   # configured, or unpacked with an empty config.h and
                                             # slurm/slurm_version.h (SLURM_VERSION_NUMBER)
or unpack it at $dest the same way and touch $dest/.gputopo-ready.
EOM
  exit 2
fi

if [ -f "$dest/.gputopo-ready" ]; then echo "$dest"; exit 0; fi

mkdir -p "$cache"
exec 9>"$cache/.lock-$ver"
flock 9
if [ -f "$dest/.gputopo-ready" ]; then echo "$dest"; exit 0; fi

command -v curl >/dev/null || { echo "fetch-slurm.sh: curl is missing (apt-get install curl)" >&2; exit 1; }
# The Debian mirror is the one apt is configured with on this machine: apt itself prints where it
# would fetch Debian 12's slurm-wlm binary package from, and the source files of every Debian
# release of slurm-wlm sit in the same pool directory. GPUTOPO_DEBIAN_POOL overrides it (a local
# mirror); nothing here names a mirror of its own.
pool=${GPUTOPO_DEBIAN_POOL:-}
if [ -z "$pool" ]; then
  uri=$(apt-get download --print-uris slurm-wlm-basic-plugins 2>/dev/null | awk 'NR == 1 { gsub("\x27", "", $1); print $1 }')
  case $uri in
    */pool/main/s/slurm-wlm/*) pool=${uri%/*} ;;
    *) echo "fetch-slurm.sh: apt knows no source for slurm-wlm (run 'apt-get update' first, or set GPUTOPO_DEBIAN_POOL to a Debian pool directory .../pool/main/s/slurm-wlm)" >&2
       exit 1 ;;
  esac
fi
tmp=$(mktemp -d "$cache/.fetch-$ver.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
get() { curl -sSfL --retry 3 -o "$tmp/$1" "$pool/$1" || { echo "fetch-slurm.sh: cannot download $pool/$1" >&2; exit 1; }; }

get "slurm-wlm_$ver.orig.tar.gz"
echo "$orig_sha256  $tmp/slurm-wlm_$ver.orig.tar.gz" | sha256sum -c --quiet - >&2 ||
  { echo "fetch-slurm.sh: slurm-wlm_$ver.orig.tar.gz from $pool does not match its pinned SHA-256" >&2; exit 1; }
if [ -n "$debver" ]; then
  command -v dpkg-source >/dev/null || { echo "fetch-slurm.sh: dpkg-source is missing (apt-get install dpkg-dev)" >&2; exit 1; }
  get "slurm-wlm_$debver.dsc"
  get "slurm-wlm_$debver.debian.tar.xz"
  (cd "$tmp" && dpkg-source --no-check -x "slurm-wlm_$debver.dsc" tree >/dev/null)
else
  mkdir "$tmp/tree"
  tar -xzf "$tmp/slurm-wlm_$ver.orig.tar.gz" -C "$tmp/tree" --strip-components=1
fi

tree=$tmp/tree
# The two generated headers bindgen needs (their content does not depend on configure options).
got=$("$(dirname "$0")/prepare-tree.sh" --release "$tree")
[ "$got" = "$ver" ] || { echo "fetch-slurm.sh: META says $got, expected $ver" >&2; exit 1; }
"$(dirname "$0")/prepare-tree.sh" "$tree" --in-place >/dev/null
touch "$tree/.gputopo-ready"
rm -rf "$dest"
mv "$tree" "$dest"
echo "$dest"
