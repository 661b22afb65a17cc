# shellcheck shell=bash
# gres.conf, fake GPU devices and fake_gpus.conf for contrib/cluster.sh `up`, sourced by it
# (uses its variables: dir, nodes, topo, gres_conf, node_gres, node_gres_of, node_topology, plain_gres,
# fake_gpus, repo, here).
gputopo_bin() {
  if [ -n "${GPUTOPO_BIN:-}" ]; then echo "$GPUTOPO_BIN"; return; fi
  local t=${CARGO_TARGET_DIR:-$repo/target}
  case $t in /*) ;; *) t=$repo/$t ;; esac
  if [ ! -x "$t/release/gputopo" ]; then
    log "building the gputopo command (cargo build --release -p gputopo-agent)"
    (cd "$repo" && cargo build -q --release -p gputopo-agent --bin gputopo) >&2 || die "cannot build gputopo"
  fi
  echo "$t/release/gputopo"
}

# The value of NODE in a `n1=a,n2=b` list, or nothing.
list_value() { # LIST NODE
  tr , '\n' <<<"$1" | sed -n "s/^$2=//p" | tail -n 1
}

# The topology file of NODE: its --node-topology entry, else --topology.
node_topo() {
  local t
  t=$(list_value "$node_topology" "$1")
  if [ -z "$t" ]; then echo "$topo"
  elif [ -f "$t" ]; then realpath "$t"
  elif [ -f "$here/topologies/$t.topo" ]; then echo "$here/topologies/$t.topo"
  else die "--node-topology $1=$t: no such topology"; fi
}

# --gres-conf: FILE per node (see the header) and the fake devices nvidia0..N-1, N the total
# count in --node-gres.
write_gres_from_file() {
  local i node line total=0 part minor
  # Only gpu entries make devices (shard:32 and mps:800 are shares of those GPUs).
  for part in ${node_gres//,/ }; do case $part in gpu:*) total=$((total + ${part##*:})) ;; esac; done
  [ "$total" -gt 0 ] || die "--node-gres '$node_gres' has no count"
  : > "$dir/etc/gres.conf"
  for i in $(seq "$nodes"); do
    node=n$i
    NODE_GRES[$node]=$(list_value "$node_gres_of" "$node")
    [ -n "${NODE_GRES[$node]}" ] || NODE_GRES[$node]=$node_gres
    mkdir -p "$dir/dev/$node"
    for minor in $(seq 0 $((total - 1))); do
      [ -e "$dir/dev/$node/nvidia$minor" ] || mknod "$dir/dev/$node/nvidia$minor" c 195 "$minor"
    done
    while IFS= read -r line || [ -n "$line" ]; do
      case $line in
        ''|'#'*) continue ;;
        # A line for one node (NodeName=nX): written once, in that node's turn (its @DEV@).
        NodeName=n[0-9]\ *|NodeName=n[0-9][0-9]\ *) [ "${line%% *}" = "NodeName=$node" ] || continue ;;
        NodeName=*|[Aa]uto[Dd]etect=*) ;;
        *) line="NodeName=$node $line" ;;
      esac
      echo "${line//@DEV@/$dir/dev/$node}"
    done < "$gres_conf" >> "$dir/etc/gres.conf"
  done
  GPU_COUNT=$total GPU_TYPE=
  write_fake_gpus
}

# --fake-gpus: etc/fake_gpus.conf with its placeholders filled in.
write_fake_gpus() {
  [ -z "$fake_gpus" ] || sed -e "s|@DIR@|$dir|g" -e "s|@DEV@|$dir/dev/n1|g" "$fake_gpus" > "$dir/etc/fake_gpus.conf"
}

# Writes gres.conf and the fake devices; sets GPU_TYPE and GPU_COUNT (of n1), and per node
# NODE_GRES[nX] (gpu:TYPE:COUNT).
declare -A NODE_GRES
write_gres() {
  local bin n i node line file minor ntopo count ty
  if [ -n "$gres_conf" ]; then
    [ -n "$node_gres" ] || die "--gres-conf needs --node-gres"
    write_gres_from_file
    return
  fi
  bin=$(gputopo_bin)
  : > "$dir/etc/gres.conf"
  for i in $(seq "$nodes"); do
    node=n$i
    ntopo=$(node_topo "$node")
    mkdir -p "$dir/dev/$node"
    "$bin" gres-conf --topology "$ntopo" --node "$node" --file-prefix "$dir/dev/$node/nvidia" \
      > "$dir/etc/gres.$node" || die "gputopo gres-conf --topology $ntopo failed"
    count=$(grep -c "^NodeName=$node " "$dir/etc/gres.$node")
    ty=$(sed -n '1s/.* Type=\([^ ]*\).*/\1/p' "$dir/etc/gres.$node")
    NODE_GRES[$node]=gpu:${ty:+$ty:}$count
    while read -r line; do
      file=$(sed -n 's/.* File=\([^ ]*\).*/\1/p' <<<"$line")
      [ -n "$file" ] || die "gres.conf line without File=: $line"
      minor=${file##*nvidia}
      [ -e "$file" ] || mknod "$file" c 195 "$minor"
    done < "$dir/etc/gres.$node"
    cat "$dir/etc/gres.$node" >> "$dir/etc/gres.conf"
    rm -f "$dir/etc/gres.$node"
  done
  [ -z "$plain_gres" ] || sed -i -E 's/ (Cores|Links)=[^ ]*//g' "$dir/etc/gres.conf"
  write_fake_gpus
  GPU_COUNT=$(grep -c '^NodeName=n1 ' "$dir/etc/gres.conf")
  GPU_TYPE=$(sed -n '1s/.* Type=\([^ ]*\).*/\1/p' "$dir/etc/gres.conf")
  [ "$GPU_COUNT" -gt 0 ] || die "no GPUs in $topo"
}
