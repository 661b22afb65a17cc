#!/usr/bin/env bash
# Build the Debian package of gputopo for one Slurm release and print the path of the .deb.
#
#   contrib/package.sh 22.05.8|24.11.5 [--stock-dir D] [--out DIR]
#
# Slurm loads a plugin only for its own major.minor.micro release, so there is one package per
# release: gputopo_<version>+slurm<release>_<arch>.deb. It holds
#   /usr/lib/<multiarch>/gputopo/select_gputopo_cons_tres.so   the plugin (both roles: select and priority)
#   /usr/bin/gputopo                                the node agent and config generators
#   /usr/libexec/gputopo/healthcheck                slurmd's HealthCheckProgram (contrib/healthcheck.sh)
#   /usr/share/gputopo/{install-plugin.sh,layout}   what the maintainer scripts run
#   /usr/share/doc/gputopo/                         README, docs, example gputopo.conf, changelog, NEWS.Debian
# and at configure time its postinst builds the plugin directory slurm.conf's PluginDir names,
# /usr/lib/<multiarch>/gputopo/plugins: select_gputopo_cons_tres.so (copied, then renamed into
# place), priority_gputopo.so -> select_gputopo_cons_tres.so, and a symlink to every stock plugin of the release
# except select_cons_tres.so (docs/deployment.md says why). A dpkg trigger on the stock plugin
# directory refreshes those links whenever a Slurm package changes it; prerm removes the
# directory's contents on removal.
#
# The stock plugin directory D (--stock-dir) defaults to the release's: Debian's packages for
# 22.05.8 (the package then depends on that exact Slurm release), the harness's source build
# (contrib/slurm-install.sh) for the others. Binaries are built with contrib/build-plugin.sh and
# cargo (release profile); the package is assembled with dpkg-deb, nothing else is needed.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
die() { echo "package.sh: $*" >&2; exit 1; }

release=${1:?usage: package.sh RELEASE [--stock-dir D] [--out DIR]}
shift
stock= out=${CARGO_TARGET_DIR:-$repo/target}/package
while [ $# -gt 0 ]; do
  case $1 in
    --stock-dir) stock=${2:?--stock-dir needs a directory}; shift 2 ;;
    --out) out=${2:?--out needs a directory}; shift 2 ;;
    *) die "unknown argument $1" ;;
  esac
done
export PATH=$HOME/.cargo/bin:$PATH
command -v dpkg-deb >/dev/null || die "dpkg-deb is missing (apt-get install dpkg)"

arch=$(dpkg --print-architecture)
multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || gcc -print-multiarch)
case $release in
  22.05.8)
    : "${stock:=/usr/lib/$multiarch/slurm-wlm}"
    # Any Debian revision of exactly 22.05.8 (the plugin ABI is the release's).
    depends="slurm-wlm-basic-plugins (>= 22.05.8), slurm-wlm-basic-plugins (<< 22.05.9~)" ;;
  *)
    : "${stock:=${GPUTOPO_CACHE:-/var/cache/gputopo}/slurm-$release/lib/slurm}"
    # A Slurm built from source is not a Debian package: nothing to depend on.
    depends= ;;
esac
[ -f "$stock/select_cons_tres.so" ] || die "$stock has no select_cons_tres.so (Slurm $release not installed there? pass --stock-dir)"

version=$(awk -F'"' '/^version *=/ { print $2; exit }' "$repo/Cargo.toml")
[ -n "$version" ] || die "no workspace version in Cargo.toml"
pkgver=$version+slurm$release
libdir=/usr/lib/$multiarch/gputopo

so=$("$here/build-plugin.sh" "$release" | tail -n 1)
cargo build --manifest-path "$repo/Cargo.toml" --release -p gputopo-agent --bin gputopo >&2
bin=${CARGO_TARGET_DIR:-$repo/target}/release/gputopo
[ -x "$bin" ] || die "$bin was not built"

stage=$out/gputopo_${pkgver}_$arch
rm -rf "$stage"
install -d "$stage/DEBIAN" "$stage$libdir/plugins" "$stage/usr/bin" "$stage/usr/libexec/gputopo" \
  "$stage/usr/share/gputopo" "$stage/usr/share/doc/gputopo/examples"
install -m 0644 "$so" "$stage$libdir/select_gputopo_cons_tres.so"
install -m 0755 "$bin" "$stage/usr/bin/gputopo"
# Debian ships binaries stripped (debug info belongs in a -dbgsym package).
strip --strip-unneeded --remove-section=.comment --remove-section=.note "$stage$libdir/select_gputopo_cons_tres.so" "$stage/usr/bin/gputopo"
install -m 0755 "$here/healthcheck.sh" "$stage/usr/libexec/gputopo/healthcheck"
install -m 0755 "$here/install-plugin.sh" "$stage/usr/share/gputopo/install-plugin.sh"
cat > "$stage/usr/share/gputopo/layout" <<EOL
# Written by contrib/package.sh for Slurm $release; read by the maintainer scripts.
GPUTOPO_RELEASE=$release
GPUTOPO_SO=$libdir/select_gputopo_cons_tres.so
GPUTOPO_PLUGIN_DIR=$libdir/plugins
GPUTOPO_STOCK_DIR=$stock
EOL
chmod 0644 "$stage/usr/share/gputopo/layout"

doc=$stage/usr/share/doc/gputopo
install -m 0644 "$repo/README.md" "$doc/README.md"
for f in "$repo"/docs/*.md; do install -m 0644 "$f" "$doc/"; done
install -m 0644 "$here/gputopo.conf.example" "$doc/examples/gputopo.conf"
install -m 0644 "$here/debian/copyright" "$doc/copyright"
{
  printf 'gputopo (%s) unstable; urgency=medium\n\n  * Built for Slurm %s.\n  * PluginDir %s/plugins\n  * Stock plugins from %s\n\n -- gputopo developers <gputopo@example.invalid>  %s\n\n' \
    "$pkgver" "$release" "$libdir" "$stock" "$(date -R -u -d "@${SOURCE_DATE_EPOCH:-$(git -C "$repo" log -1 --format=%ct 2>/dev/null || date +%s)}")"
  cat "$here/debian/changelog"
} | gzip -9n > "$doc/changelog.gz"
chmod 0644 "$doc/changelog.gz"
# Upgrade notes an administrator must read (apt-listchanges shows them before installing).
gzip -9n < "$here/debian/NEWS" > "$doc/NEWS.Debian.gz"
chmod 0644 "$doc/NEWS.Debian.gz"

install -d "$stage/usr/share/man/man1" "$stage/usr/share/lintian/overrides"
gzip -9n < "$here/debian/gputopo.1" > "$stage/usr/share/man/man1/gputopo.1.gz"
install -m 0644 "$here/debian/lintian-overrides" "$stage/usr/share/lintian/overrides/gputopo"
chmod 0644 "$stage/usr/share/man/man1/gputopo.1.gz"
for s in postinst prerm postrm; do install -m 0755 "$here/debian/$s" "$stage/DEBIAN/$s"; done
sed "s|@STOCK_DIR@|$stock|" "$here/debian/triggers.in" > "$stage/DEBIAN/triggers"
size=$(du -sk --exclude=DEBIAN "$stage" | cut -f1)
sed -e "s|@VERSION@|$pkgver|" -e "s|@ARCH@|$arch|" -e "s|@SIZE@|$size|" -e "s|@RELEASE@|$release|g" \
    -e "s|@SLURM_DEPENDS@|$depends|" "$here/debian/control.in" |
  sed -e 's/^Depends: libc6, $/Depends: libc6/' > "$stage/DEBIAN/control"
(cd "$stage" && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' | sort -z | xargs -0 md5sum) > "$stage/DEBIAN/md5sums"
chmod 0644 "$stage/DEBIAN/control" "$stage/DEBIAN/triggers" "$stage/DEBIAN/md5sums"

deb=$out/gputopo_${pkgver}_$arch.deb
dpkg-deb --root-owner-group -Zxz --build "$stage" "$deb" >&2
echo "$deb"
