#!/usr/bin/env bash
# Both package kinds of one release, end to end, as an administrator uses them (as root):
#
#   contrib/test-package.sh 22.05.8|24.11.5 [deb] [rpm]     # default: both
#
# 0. contrib/test-pkg-maint.sh: the maintainer logic alone, case by case (seconds)
# 1. builds the Debian package and the RPM (contrib/package.sh, --rpm), each twice (--revision 2:
#    the "newer" package of the upgrade tests; cargo reuses the binaries, so it costs seconds)
# 2. inspects them without installing: the control file (dpkg-deb -f, its Depends and
#    Slurm-Release), the file lists (dpkg-deb -c, rpm -qlp), the RPM's dependencies, scriptlets,
#    file triggers and %config(noreplace) files (rpm -qp --requires --scripts --filetriggers),
#    the agent's systemd unit and the scripts that manage it (deb: enabled on install; rpm: presets),
#    that no installed file names the build host's Slurm prefix and the plugin has no RUNPATH,
#    and lintian (errors and warnings fail; "skipped" when lintian is not installed)
# 3. installs and uses each in its own scratch host (contrib/pkg-sandbox.sh: this host behind a
#    copy-on-write layer in a private mount namespace; the host itself never gets the package):
#    contrib/test-package-install.sh runs a GPU job through the installed files, upgrades,
#    downgrades and reinstalls while slurmctld runs, and removes the package while slurm.conf
#    still points at it. For a release built from source (24.11.5) the Debian package is
#    installed on a host whose Slurm lives under another prefix than the build's.
# Prints one line per check and "package R: N passed, N failed"; exits non-zero on any failure.
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
release=${1:?usage: test-package.sh RELEASE [deb] [rpm]}
shift
kinds=${*:-deb rpm}
check_prefix=""
# shellcheck source=contrib/checks.sh
. "$here/checks.sh"
# shellcheck source=contrib/lib.sh
. "$here/lib.sh"
finish() {
  echo "package $release: $passed passed, $failed failed"
  [ "$failed" = 0 ]
  exit
}
[ "$(id -u)" = 0 ] || { echo "test-package.sh: run as root (mount namespaces, dpkg -i, rpm -i)" >&2; exit 1; }
cache=${GPUTOPO_CACHE:-/var/cache/gputopo}
t0=$(date +%s)

# --- 0. the maintainer logic alone (slurm.conf parsing, discovery order, removal rules) -----
out=$("$here/test-pkg-maint.sh" 2>&1)
echo "$out"
p=$(sed -n 's/^maint: \([0-9]*\) passed, \([0-9]*\) failed$/\1 \2/p' <<<"$out")
if [ -n "$p" ]; then passed=$((passed + ${p% *})) failed=$((failed + ${p#* }))
elif ! grep -q '^skipped: maint.sh cases' <<<"$out"; then check "contrib/test-pkg-maint.sh ran to its end" false; fi

# --- 1. build -----------------------------------------------------------------------------
declare -A pkg
log=$(mktemp)
trap 'rm -f "$log"' EXIT
for k in $kinds; do
  flag=; [ "$k" = rpm ] && flag=--rpm
  for rev in 1 2; do
    revarg=(); [ "$rev" = 2 ] && revarg=(--revision 2)
    if ! pkg[$k$rev]=$("$here/package.sh" "$release" $flag "${revarg[@]}" 2>"$log" | tail -n 1) ||
       [ ! -f "${pkg[$k$rev]}" ]; then
      tail -n 30 "$log"
      check "contrib/package.sh $release $flag ${revarg[*]} builds" false
      finish
    fi
  done
  echo "$k: ${pkg[${k}1]} (and revision 2)"
done
echo "built in $(( $(date +%s) - t0 )) s"

# --- 2. inspect ---------------------------------------------------------------------------
no_runpath() { [ -f "$1" ] && ! readelf -d "$1" | grep -q RUNPATH; }
for k in $kinds; do
  p=${pkg[${k}1]}
  x=$(mktemp -d)
  case $k in
    deb)
      check "deb: dpkg-deb reads the control file" dpkg-deb --field "$p" Package Version Depends
      check "deb: it names its Slurm release" test "$(dpkg-deb --field "$p" Slurm-Release)" = "$release"
      check "deb: it depends on binutils (the scripts read plugin_version)" grep -q binutils <<<"$(dpkg-deb --field "$p" Depends)"
      if release_is_debian "$release"; then
        next=$(awk -F. '{ printf "%s.%s.%d", $1, $2, $3 + 1 }' <<<"$release")
        check "deb: it depends on Debian's Slurm $release exactly" grep -qF "slurm-wlm-basic-plugins (>= $release), slurm-wlm-basic-plugins (<< $next~)" <<<"$(dpkg-deb --field "$p" Depends)"
      fi
      list=$(dpkg-deb -c "$p")
      for f in usr/bin/gputopo usr/libexec/gputopo/healthcheck usr/share/gputopo/maint.sh etc/slurm/gputopo.conf etc/default/gputopo usr/share/doc/gputopo/examples/gputopo.conf; do
        check "deb: ships /$f" grep -q " \./$f\$" <<<"$list"
      done
      check "deb: ships the agent's service /lib/systemd/system/gputopo-agent.service" grep -q ' \./lib/systemd/system/gputopo-agent\.service$' <<<"$list"
      dpkg-deb -R "$p" "$x"
      unit=$x/lib/systemd/system/gputopo-agent.service
      check "deb: the service runs the packaged agent (gputopo serve)" grep -qx 'ExecStart=/usr/bin/gputopo serve .*' "$unit"
      check "deb: its StateDirectory is the agent's default StateDir (/var/lib/gputopo)" grep -qx 'StateDirectory=gputopo' "$unit"
      check "deb: the service reads /etc/default/gputopo" grep -qx 'EnvironmentFile=-/etc/default/gputopo' "$unit"
      # dh_installsystemd's defaults: enabled on first install, an administrator's disable kept
      # (was-enabled), started through deb-systemd-invoke (which honours policy-rc.d and a
      # disabled unit), restarted on upgrade; stop on remove, mask on remove, purge of links.
      check "deb: postinst enables the service the Debian way (deb-systemd-helper was-enabled, enable)" \
        bash -c "grep -q 'deb-systemd-helper --quiet was-enabled gputopo-agent.service' '$x/DEBIAN/postinst' && grep -q 'deb-systemd-helper enable gputopo-agent.service' '$x/DEBIAN/postinst' && ! grep -Eq 'systemctl (--[a-z-]+ )*(enable|start|preset)' '$x/DEBIAN/postinst'"
      check "deb: postinst starts it on install, restarts it on upgrade (deb-systemd-invoke)" grep -q 'deb-systemd-invoke $action gputopo-agent.service' "$x/DEBIAN/postinst"
      check "deb: prerm stops the service on remove" grep -q 'deb-systemd-invoke stop gputopo-agent.service' "$x/DEBIAN/prerm"
      check "deb: postrm masks on remove and purges its links" bash -c "grep -q 'deb-systemd-helper mask gputopo-agent.service' '$x/DEBIAN/postrm' && grep -q 'deb-systemd-helper purge gputopo-agent.service' '$x/DEBIAN/postrm'"
      check "deb: the plugin has no RUNPATH (to the build host's libslurmfull.so)" no_runpath "$x"/usr/lib/*/gputopo/select_gputopo_cons_tres.so
      check "deb: conffiles: gputopo.conf and /etc/default/gputopo" test "$(sort "$x/DEBIAN/conffiles" | tr '\n' ' ')" = "/etc/default/gputopo /etc/slurm/gputopo.conf "
      check "deb: triggers on the Slurm packages' plugin directories" grep -q '^interest-noawait /usr/lib/.*/slurm-wlm$' "$x/DEBIAN/triggers"
      check "deb: nothing in it names the build's Slurm prefix (docs aside)" bash -c "! grep -rlIF '$cache/slurm-' '$x' --exclude-dir=doc"
      if command -v lintian >/dev/null; then
        lint=$(lintian --fail-on error,warning "$p" 2>&1); rc=$?
        grep -v 'root privileges' <<<"$lint" | sed 's/^/  [lintian] /'
        check "deb: lintian finds no error or warning" test "$rc" = 0
      else
        echo "skipped: deb: lintian (not installed)"
      fi ;;
    rpm)
      check "rpm: rpm reads it" rpm -qp "$p"
      check "rpm: Release names the Slurm release" grep -q "\.slurm$release" <<<"$(rpm -qp --qf '%{RELEASE}' "$p")"
      reqs=$(rpm -qp --requires "$p")
      check "rpm: requires slurm = $release (SchedMD's package name)" grep -qxF "slurm(x86-64) = $release" <<<"$reqs"
      check "rpm: requires binutils for its scriptlets" grep -qx 'binutils' <<<"$reqs"
      list=$(rpm -qlp "$p")
      for f in /usr/bin/gputopo /usr/lib64/gputopo/select_gputopo_cons_tres.so /usr/lib64/gputopo/plugins /usr/libexec/gputopo/healthcheck /usr/share/gputopo/maint.sh /usr/share/man/man1/gputopo.1 /etc/slurm/gputopo.conf /etc/sysconfig/gputopo; do
        check "rpm: ships $f" grep -qx "$f" <<<"$list"
      done
      flags=$(rpm -qp --qf '[%{FILEFLAGS:fflags} %{FILENAMES}\n]' "$p")
      check "rpm: gputopo.conf is %config(noreplace)" grep -qx 'cn /etc/slurm/gputopo.conf' <<<"$flags"
      check "rpm: /etc/sysconfig/gputopo is %config(noreplace)" grep -qx 'cn /etc/sysconfig/gputopo' <<<"$flags"
      scripts=$(rpm -qp --scripts --filetriggers "$p")
      check "rpm: %post configures (maint.sh, as the Debian postinst)" grep -q 'maint.sh configure' <<<"$scripts"
      check "rpm: %preun removes on erase only" grep -q 'maint.sh remove --final' <<<"$scripts"
      check "rpm: a file trigger on %{_libdir}/slurm refreshes" grep -q 'transfiletriggerin.* -- /usr/lib64/slurm' <<<"$scripts"
      check "rpm: ships the agent's service /usr/lib/systemd/system/gputopo-agent.service" grep -qx /usr/lib/systemd/system/gputopo-agent.service <<<"$list"
      # systemd's macros (or the spec's copies of RHEL 8's): preset on install, disable on
      # erase, try-restart on upgrade; each after gputopo's own step.
      sect() { awk -v s="$1" '/^[a-z]+ scriptlet/ { on = ($1 == s) } on' <<<"$scripts"; }
      check "rpm: %post presets the service (enabled only where the site's presets say so)" grep -q 'preset.*gputopo-agent.service' <<<"$(sect postinstall)"
      pre=$(sect preuninstall)
      check "rpm: %preun stops at a refused removal (the service keeps running)" grep -qF 'maint.sh remove --final || exit 1' <<<"$pre"
      check "rpm: %preun disables the service on erase" grep -q 'disable.*gputopo-agent.service' <<<"$pre"
      check "rpm: %postun restarts a running service on upgrade" grep -q 'try-restart.*gputopo-agent.service' <<<"$(sect postuninstall)"
      rpm2archive - < "$p" | tar -xzf - -C "$x"
      unit=$x/usr/lib/systemd/system/gputopo-agent.service
      check "rpm: the service runs the packaged agent (gputopo serve)" grep -qx 'ExecStart=/usr/bin/gputopo serve .*' "$unit"
      check "rpm: its StateDirectory is the agent's default StateDir (/var/lib/gputopo)" grep -qx 'StateDirectory=gputopo' "$unit"
      check "rpm: the service reads /etc/sysconfig/gputopo" grep -qx 'EnvironmentFile=-/etc/sysconfig/gputopo' "$unit"
      check "rpm: the plugin has no RUNPATH (to the build host's libslurmfull.so)" no_runpath "$x/usr/lib64/gputopo/select_gputopo_cons_tres.so"
      check "rpm: nothing in it names the build's Slurm prefix (docs aside)" bash -c "! grep -rlIF '$cache/slurm-' '$x' --exclude-dir=doc" ;;
  esac
  rm -rf "$x"
done

# --- 3. install and use, each kind in its own scratch host ---------------------------------
# The agent's service checks the node's GPUs through the project's fake NVML.
if [ -z "${FAKE_NVML_LIB:-}" ]; then
  repo=$(cd "$here/.." && pwd)
  (cd "$repo" && PATH=$HOME/.cargo/bin:$PATH cargo build -q -p fake-nvml) || { check "the fake NVML builds" false; finish; }
  FAKE_NVML_LIB=$(realpath -m "${CARGO_TARGET_DIR:-$repo/target}")/debug/libfake_nvml.so
fi
export FAKE_NVML_LIB
for k in $kinds; do
  sandbox=("$here/pkg-sandbox.sh")
  other=()
  if [ "$k" = deb ] && ! release_is_debian "$release"; then
    # The build's prefix is $cache/slurm-R; the host's Slurm lives under another one of the same
    # length (pkg-sandbox.sh rewrites the compiled-in paths of a copy).
    old=$cache/slurm-$release
    pad=$(( ${#old} - 5 - ${#release} - 7 ))
    if [ "$pad" -ge 1 ]; then
      name=site-slurm
      while [ "${#name}" -lt "$pad" ]; do name=${name}x; done
      new=/opt/${name:0:$pad}/slurm-$release
      sandbox+=(--relocate "$old" "$new")
      other=(--other-prefix "$new")
    else
      echo "skipped: deb $release on another prefix ($old is too short to relocate)"
    fi
  fi
  t1=$(date +%s)
  out=$("${sandbox[@]}" "$here/test-package-install.sh" "$k" "$release" "${pkg[${k}1]}" "${pkg[${k}2]}" "${other[@]}" 2>&1)
  echo "$out"
  p=$(sed -n "s/^$k $release: \([0-9]*\) passed, \([0-9]*\) failed$/\1 \2/p" <<<"$out")
  if [ -n "$p" ]; then
    passed=$((passed + ${p% *})) failed=$((failed + ${p#* }))
  else
    check "$k $release: the install test ran to its end" false
  fi
  echo "$k $release: install test in $(( $(date +%s) - t1 )) s"
done
echo "package $release: $(( $(date +%s) - t0 )) s in all"
finish
