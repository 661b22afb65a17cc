#!/usr/bin/env bash
# Build gputopo's package for one Slurm release and print its path: a Debian package (default)
# or an RPM (--rpm).
#
#   contrib/package.sh RELEASE [--rpm] [--slurm-src TREE|TARBALL] [--revision N]
#                      [--slurm-package NAME] [--stock-dir D] [--out DIR]
#
# Slurm loads a plugin only for its own major.minor.micro release, so there is one package per
# release. The plugin is compiled against the Slurm source tree of that release: --slurm-src (the
# tree or the tarball the site builds its Slurm from), else slurm-headers/fetch-slurm.sh RELEASE.
#
# Debian: gputopo_<version>+slurm<release>[-N]_<arch>.deb, assembled with dpkg-deb, holding
#   /usr/lib/<multiarch>/gputopo/select_gputopo_cons_tres.so   the plugin (select and priority)
#   /usr/lib/<multiarch>/gputopo/plugins/                       the PluginDir, filled at install
#   /usr/bin/gputopo                                the node agent and config generators
#   /usr/libexec/gputopo/healthcheck                slurmd's HealthCheckProgram (contrib/healthcheck.sh)
#   /lib/systemd/system/gputopo-agent.service       the agent as a service (`gputopo serve`), enabled on install
#   /usr/share/gputopo/{maint.sh,install-plugin.sh,layout}   what the maintainer scripts run
#   /etc/slurm/gputopo.conf, /etc/default/gputopo   conffiles: every key commented with its default
#   /usr/share/doc/gputopo/                         README, docs, example gputopo.conf, changelog, NEWS.Debian
# RPM (--rpm): gputopo-<version>-<N>.slurm<release>.<arch>.rpm, built by rpmbuild from
#   contrib/rpm/gputopo.spec in this checkout (--build-in-place: the cargo builds already made
#   here are reused); the same files in the RPM places (%{_libdir}/gputopo, %{_bindir},
#   %{_libexecdir}/gputopo, %{_datadir}/gputopo, %{_unitdir}, /etc/slurm, /etc/sysconfig/gputopo).
#
# Nothing of the build host's Slurm installation goes into the package: at install time
# contrib/pkg-maint.sh finds the host's stock plugin directory (docs/deployment.md) and builds
# the plugin directory from it; --stock-dir D only adds D to the places it looks first.
# Dependencies on Slurm: the 22.05.8 package depends on Debian's slurm-wlm-basic-plugins of
# exactly 22.05.8; for any other release --slurm-package NAME (e.g. slurm-smd, SchedMD's own
# Debian packages) makes it depend on NAME of exactly that release, and without it the control
# file names the release in its Slurm-Release field (a Slurm built from source is no package).
# The RPM requires `slurm = RELEASE` (SchedMD's slurm.spec names its packages so). --revision N
# numbers rebuilds of the same version (Debian: <version>+slurm<release>-N; RPM: Release N).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=contrib/lib.sh
. "$here/lib.sh"
repo=$(cd "$here/.." && pwd)
die() { echo "package.sh: $*" >&2; exit 1; }

release=${1:?usage: package.sh RELEASE [--rpm] [--slurm-src TREE|TARBALL] [--revision N] [--slurm-package NAME] [--stock-dir D] [--out DIR]}
shift
stock= out=${CARGO_TARGET_DIR:-$repo/target}/package rpm= slurm_src= revision= slurm_package=
while [ $# -gt 0 ]; do
  case $1 in
    --stock-dir) stock=${2:?--stock-dir needs a directory}; shift 2 ;;
    --out) out=${2:?--out needs a directory}; shift 2 ;;
    --rpm) rpm=1; shift ;;
    --slurm-src) slurm_src=${2:?--slurm-src needs a tree or a tarball}; shift 2 ;;
    --revision) revision=${2:?--revision needs a number}; shift 2 ;;
    --slurm-package) slurm_package=${2:?--slurm-package needs a package name}; shift 2 ;;
    *) die "unknown argument $1" ;;
  esac
done
[ -z "$revision" ] || [[ $revision =~ ^[1-9][0-9]*$ ]] || die "--revision must be a positive number"
export PATH=$HOME/.cargo/bin:$PATH
mkdir -p "$out"
out=$(cd "$out" && pwd)
target=$(realpath -m "${CARGO_TARGET_DIR:-$repo/target}")

version=$(awk -F'"' '/^version *=/ { print $2; exit }' "$repo/Cargo.toml")
[ -n "$version" ] || die "no workspace version in Cargo.toml"
# The Slurm tree bindgen reads (a site's tarball is unpacked, an unconfigured tree copied).
if [ -n "$slurm_src" ]; then
  got=$("$repo/slurm-headers/prepare-tree.sh" --release "$slurm_src") || exit 1
  [ "$got" = "$release" ] || die "$slurm_src is Slurm $got, not $release"
  SLURM_SRC_DIR=$("$repo/slurm-headers/prepare-tree.sh" "$slurm_src" "$out/slurm-src-$release") || exit 1
  export SLURM_SRC_DIR
fi
src=${SLURM_SRC_DIR:-$("$repo/slurm-headers/fetch-slurm.sh" "$release")}

if [ -n "$rpm" ]; then
  command -v rpmbuild >/dev/null || die "rpmbuild is missing (Debian: apt-get install rpm; RHEL: dnf install rpm-build)"
  spec=$repo/contrib/rpm/gputopo.spec
  specver=$(awk '$1 == "Version:" { print $2; exit }' "$spec")
  [ "$specver" = "$version" ] || die "$spec has Version $specver but Cargo.toml $version"
  top=$out/rpmbuild
  mkdir -p "$top"/{BUILD,BUILDROOT,RPMS,SOURCES,SPECS,SRPMS}
  # BuildRequires: slurm = RELEASE (its libslurmfull.so is what the plugin links against). A
  # Slurm installed from source, or a host whose rpm database is not the system's (Debian), has
  # no such RPM: the build checks the library itself (build.rs), so rpmbuild skips the check.
  nodeps=()
  if ! rpm -q --whatprovides "slurm = $release" >/dev/null 2>&1; then
    echo "package.sh: no RPM provides slurm = $release here; building with rpmbuild --nodeps" >&2
    nodeps=(--nodeps)
  fi
  defines=(--define "_topdir $top" --define "slurm_source $src" --define "slurm_version $release"
    --define "cargo_target_dir $target")
  [ -z "$revision" ] || defines+=(--define "gputopo_revision $revision")
  [ -z "$stock" ] || defines+=(--define "gputopo_stock_hint $stock")
  name="gputopo-$version-${revision:-1}.slurm$release.*.rpm"
  find "$top/RPMS" -name "$name" -delete
  (cd "$repo" && rpmbuild -bb --build-in-place "${nodeps[@]}" "${defines[@]}" "$spec" >&2) ||
    die "rpmbuild failed"
  found=$(find "$top/RPMS" -name "$name" | head -n 1)
  [ -n "$found" ] || die "rpmbuild made no $name under $top/RPMS"
  echo "$found"
  exit 0
fi

command -v dpkg-deb >/dev/null || die "dpkg-deb is missing (apt-get install dpkg)"
command -v chrpath >/dev/null || die "chrpath is missing (apt-get install chrpath)"
arch=$(dpkg --print-architecture)
multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || gcc -print-multiarch)
# Where Slurm's Debian packages put their plugins: Debian's slurm-wlm, SchedMD's slurm-smd.
pkg_dirs="/usr/lib/$multiarch/slurm-wlm /usr/lib/$multiarch/slurm"
# Debian's own release: any Debian revision of exactly that release (the plugin ABI is the
# release's).
if release_is_debian "$release"; then : "${slurm_package:=slurm-wlm-basic-plugins}"; fi
next=$(awk -F. '{ printf "%s.%s.%d", $1, $2, $3 + 1 }' <<<"$release")
depends="libc6, binutils"
[ -z "$slurm_package" ] || depends="$depends, $slurm_package (>= $release), $slurm_package (<< $next~)"

pkgver=$version+slurm$release${revision:+-$revision}
libdir=/usr/lib/$multiarch/gputopo

so=$(SLURM_SRC_DIR=$src "$here/build-plugin.sh" "$release" | tail -n 1)
cargo build --manifest-path "$repo/Cargo.toml" --release -p gputopo-agent --bin gputopo >&2
bin=$target/release/gputopo
[ -x "$bin" ] || die "$bin was not built"

stage=$out/gputopo_${pkgver}_$arch
rm -rf "$stage"
install -d "$stage/DEBIAN" "$stage$libdir/plugins" "$stage/usr/bin" "$stage/usr/libexec/gputopo" \
  "$stage/usr/share/gputopo" "$stage/usr/share/doc/gputopo/examples" "$stage/etc/slurm" "$stage/etc/default"
install -m 0644 "$so" "$stage$libdir/select_gputopo_cons_tres.so"
install -m 0755 "$bin" "$stage/usr/bin/gputopo"
# Debian ships binaries stripped (debug info belongs in a -dbgsym package).
strip --strip-unneeded --remove-section=.comment --remove-section=.note "$stage$libdir/select_gputopo_cons_tres.so" "$stage/usr/bin/gputopo"
# The RUNPATH to the build host's libslurmfull.so directory goes: every Slurm process that loads
# the plugin has libslurmfull.so loaded already, and the loader matches it by its soname.
chrpath -d "$stage$libdir/select_gputopo_cons_tres.so" >/dev/null
install -m 0755 "$here/healthcheck.sh" "$stage/usr/libexec/gputopo/healthcheck"
# Where dh_installsystemd puts units on Debian 12 (the maintainer scripts carry its snippets).
install -D -m 0644 "$here/systemd/gputopo-agent.service" "$stage/lib/systemd/system/gputopo-agent.service"
install -m 0755 "$here/install-plugin.sh" "$stage/usr/share/gputopo/install-plugin.sh"
install -m 0755 "$here/pkg-maint.sh" "$stage/usr/share/gputopo/maint.sh"
cat > "$stage/usr/share/gputopo/layout" <<EOL
# Written by contrib/package.sh for Slurm $release; read by maint.sh (contrib/pkg-maint.sh).
GPUTOPO_VERSION=$pkgver
GPUTOPO_RELEASE=$release
GPUTOPO_SO=$libdir/select_gputopo_cons_tres.so
GPUTOPO_PLUGIN_DIR=$libdir/plugins
GPUTOPO_STOCK_CANDIDATES="${stock:+$stock }$pkg_dirs"
GPUTOPO_DEFAULTS=/etc/default/gputopo
GPUTOPO_STATE_DIR=/var/lib/gputopo
EOL
chmod 0644 "$stage/usr/share/gputopo/layout"
install -m 0644 "$here/gputopo.conf.example" "$stage/etc/slurm/gputopo.conf"
install -m 0644 "$here/pkg-defaults" "$stage/etc/default/gputopo"

doc=$stage/usr/share/doc/gputopo
install -m 0644 "$repo/README.md" "$doc/README.md"
for f in "$repo"/docs/*.md; do install -m 0644 "$f" "$doc/"; done
install -m 0644 "$here/gputopo.conf.example" "$doc/examples/gputopo.conf"
install -m 0644 "$here/debian/copyright" "$doc/copyright"
{
  printf 'gputopo (%s) unstable; urgency=medium\n\n  * Built for Slurm %s.\n  * PluginDir %s/plugins\n\n -- gputopo developers <gputopo@example.invalid>  %s\n\n' \
    "$pkgver" "$release" "$libdir" "$(date -R -u -d "@${SOURCE_DATE_EPOCH:-$(git -C "$repo" log -1 --format=%ct 2>/dev/null || date +%s)}")"
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
for s in postinst prerm postrm; do
  sed "s|@PLUGIN_DIR@|$libdir/plugins|g" "$here/debian/$s" > "$stage/DEBIAN/$s"
  chmod 0755 "$stage/DEBIAN/$s"
done
printf 'interest-noawait %s\n' $pkg_dirs > "$stage/DEBIAN/triggers"
printf '/etc/default/gputopo\n/etc/slurm/gputopo.conf\n' > "$stage/DEBIAN/conffiles"
size=$(du -sk --exclude=DEBIAN "$stage" | cut -f1)
slurm_field="Slurm-Release: $release"
sed -e "s|@VERSION@|$pkgver|" -e "s|@ARCH@|$arch|" -e "s|@SIZE@|$size|" -e "s|@RELEASE@|$release|g" \
    -e "s|@DEPENDS@|$depends|" -e "s|@SLURM_FIELD@|$slurm_field|" "$here/debian/control.in" > "$stage/DEBIAN/control"
(cd "$stage" && find . -path ./DEBIAN -prune -o -path ./etc -prune -o -type f -printf '%P\0' | sort -z | xargs -0 md5sum) > "$stage/DEBIAN/md5sums"
chmod 0644 "$stage/DEBIAN/control" "$stage/DEBIAN/triggers" "$stage/DEBIAN/md5sums" "$stage/DEBIAN/conffiles"

deb=$out/gputopo_${pkgver}_$arch.deb
dpkg-deb --root-owner-group -Zxz --build "$stage" "$deb" >&2
echo "$deb"
