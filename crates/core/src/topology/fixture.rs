//! gputopo's own topology fixture format: one node's GPUs and links in Slurm `Key=Value` style.
//!
//! The format is what the repository's topology files under `contrib/topologies/` use, and
//! what the local-cluster harness turns into gres.conf. Example (a 4-GPU slice):
//!
//! ```text
//! # 4x RTX 8000, NVLink bridges on 0-3 and 1-2
//! Node Name=rtx8000x4 Type=rtx8000 Gpus=4 SameSocket=NODE
//! Gpu Index=0 Socket=0 Cores=0-15
//! Gpu Index=1 Socket=0 Cores=0-15
//! Gpu Index=2 Socket=1 Cores=16-31
//! Gpu Index=3 Socket=1 Cores=16-31
//! NvLink Gpus=0,3 Count=2
//! NvLink Gpus=1,2 Count=2
//! Pcie Gpus=0,1 Level=PIX
//! ```
//!
//! - `Node` (first non-comment line): `Name`, optional `Type`, `Gpus` (count), optional
//!   `SameSocket` (default PCIe level within a socket, default `PHB`).
//! - `Gpu`: `Index`, optional `Socket`, `Cores`, `BusId`, `Minor`, `Uuid`, `SwitchLinks`
//!   (NVLinks into an NVSwitch fabric). Unlisted GPUs have no attributes.
//! - `NvLink`: `Gpus=a,b`, `Count` (direct links between the pair).
//! - `Pcie`: `Gpus=a,b`, `Level` (`SB`, `PIX`, `PXB`, `PHB`, `NODE`, `SYS`); overrides the
//!   socket-derived default. Across sockets the default is `SYS`.
//!
//! Errors name the line and the field; nothing panics on any input.

use super::{Gpu, NodeTopology, PcieLevel};
use crate::keyvalue::{self, LineError, check_keys, get, parse_num};

/// Parses a fixture file's text.
///
/// # Errors
/// [`LineError`] naming the line and field of the first problem.
pub fn parse(text: &str) -> Result<NodeTopology, LineError> {
    let mut header: Option<Header> = None;
    let mut gpus: Vec<Gpu> = Vec::new();
    // (line, a, b, nvlinks or pcie)
    let mut edges: Vec<(usize, usize, usize, Edge)> = Vec::new();
    for (line, words) in keyvalue::lines(text) {
        let words = words?;
        let kind = words[0].key;
        if words[0].has_value {
            return Err(LineError::new(
                line,
                kind,
                "a line must start with Node, Gpu, NvLink or Pcie",
            ));
        }
        let rest = &words[1..];
        match kind.to_ascii_lowercase().as_str() {
            "node" => {
                if header.is_some() {
                    return Err(LineError::new(
                        line,
                        "Node",
                        "only one Node line is allowed",
                    ));
                }
                let name =
                    get(rest, "Name").ok_or_else(|| LineError::new(line, "Name", "missing"))?;
                let count: usize = parse_num(line, rest, "Gpus")?
                    .ok_or_else(|| LineError::new(line, "Gpus", "missing"))?;
                if count == 0 || count > crate::gpuset::MAX_GPUS {
                    return Err(LineError::new(
                        line,
                        "Gpus",
                        format!("must be 1 to {}", crate::gpuset::MAX_GPUS),
                    ));
                }
                let same = match get(rest, "SameSocket") {
                    Some(v) => level(line, "SameSocket", v)?,
                    None => PcieLevel::Phb,
                };
                check_keys(line, rest, &["Name", "Type", "Gpus", "SameSocket"])?;
                gpus = (0..count)
                    .map(|index| Gpu {
                        index,
                        ..Gpu::default()
                    })
                    .collect();
                header = Some((
                    line,
                    name.to_string(),
                    get(rest, "Type").map(str::to_string),
                    count,
                    same,
                ));
            }
            "gpu" => {
                let n = need_header(line, &header)?;
                check_keys(
                    line,
                    rest,
                    &[
                        "Index",
                        "Socket",
                        "Cores",
                        "BusId",
                        "Minor",
                        "Uuid",
                        "SwitchLinks",
                    ],
                )?;
                let idx: usize = parse_num(line, rest, "Index")?
                    .ok_or_else(|| LineError::new(line, "Index", "missing"))?;
                if idx >= n {
                    return Err(LineError::new(
                        line,
                        "Index",
                        format!("{idx} is not below Gpus={n}"),
                    ));
                }
                let g = &mut gpus[idx];
                g.socket = parse_num(line, rest, "Socket")?;
                if let Some(c) = get(rest, "Cores") {
                    g.cores = crate::cpulist::parse_members(c, 1 << 16)
                        .map_err(|m| LineError::new(line, "Cores", m))?;
                }
                g.bus_id = get(rest, "BusId").map(str::to_string);
                g.minor = parse_num(line, rest, "Minor")?;
                g.uuid = get(rest, "Uuid").map(str::to_string);
                g.switch_links = parse_num(line, rest, "SwitchLinks")?.unwrap_or(0);
            }
            "nvlink" | "pcie" => {
                let n = need_header(line, &header)?;
                let is_nv = kind.eq_ignore_ascii_case("nvlink");
                let value_key = if is_nv { "Count" } else { "Level" };
                check_keys(line, rest, &["Gpus", value_key])?;
                let pair =
                    get(rest, "Gpus").ok_or_else(|| LineError::new(line, "Gpus", "missing"))?;
                let (a, b) = parse_pair(line, pair, n)?;
                let edge = if is_nv {
                    Edge::Nv(
                        parse_num(line, rest, "Count")?
                            .ok_or_else(|| LineError::new(line, "Count", "missing"))?,
                    )
                } else {
                    let v = get(rest, "Level")
                        .ok_or_else(|| LineError::new(line, "Level", "missing"))?;
                    Edge::Pcie(level(line, "Level", v)?)
                };
                edges.push((line, a, b, edge));
            }
            other => {
                return Err(LineError::new(
                    line,
                    other,
                    "unknown line kind (expected Node, Gpu, NvLink or Pcie)",
                ));
            }
        }
    }
    let (hline, name, gpu_type, _, same) =
        header.ok_or_else(|| LineError::new(1, "Node", "no Node line"))?;
    let mut topo = NodeTopology::new(name, gpus, same)
        .map_err(|e| LineError::new(hline, "Gpus", e.to_string()))?;
    topo.gpu_type = gpu_type;
    for (line, a, b, edge) in edges {
        let r = match edge {
            Edge::Nv(c) => topo.set_nvlinks(a, b, c),
            Edge::Pcie(l) => topo.set_pcie(a, b, l),
        };
        r.map_err(|e| LineError::new(line, "Gpus", e.to_string()))?;
    }
    topo.apply_nvswitch();
    Ok(topo)
}

/// Writes a topology in the fixture format; `parse(render(t)) == t` for every topology whose
/// NVLink counts came from direct links (switch links are written back as `SwitchLinks`).
pub fn render(t: &NodeTopology) -> String {
    use std::fmt::Write;
    let n = t.len();
    let mut s = String::new();
    let _ = write!(s, "Node Name={} ", t.name);
    if let Some(ty) = &t.gpu_type {
        let _ = write!(s, "Type={ty} ");
    }
    let _ = writeln!(s, "Gpus={n} SameSocket=PHB");
    for g in t.gpus() {
        let _ = write!(s, "Gpu Index={}", g.index);
        if let Some(x) = g.socket {
            let _ = write!(s, " Socket={x}");
        }
        if !g.cores.is_empty() {
            let r = crate::cpulist::to_ranges(g.cores.iter().copied());
            let _ = write!(s, " Cores={}", crate::cpulist::format_ranges(&r));
        }
        if let Some(x) = &g.bus_id {
            let _ = write!(s, " BusId={x}");
        }
        if let Some(x) = g.minor {
            let _ = write!(s, " Minor={x}");
        }
        if let Some(x) = &g.uuid {
            let _ = write!(s, " Uuid={x}");
        }
        if g.switch_links > 0 {
            let _ = write!(s, " SwitchLinks={}", g.switch_links);
        }
        s.push('\n');
    }
    for a in 0..n {
        for b in a + 1..n {
            let l = t.link(a, b);
            let (sa, sb) = (t.gpus()[a].switch_links, t.gpus()[b].switch_links);
            let via_switch = if sa > 0 && sb > 0 { sa.min(sb) } else { 0 };
            let direct = l.nvlinks.saturating_sub(via_switch);
            if direct > 0 {
                let _ = writeln!(s, "NvLink Gpus={a},{b} Count={direct}");
            }
            let _ = writeln!(s, "Pcie Gpus={a},{b} Level={}", l.pcie);
        }
    }
    s
}

enum Edge {
    Nv(u8),
    Pcie(PcieLevel),
}

type Header = (usize, String, Option<String>, usize, PcieLevel);

fn need_header(line: usize, header: &Option<Header>) -> Result<usize, LineError> {
    header
        .as_ref()
        .map(|h| h.3)
        .ok_or_else(|| LineError::new(line, "Node", "the Node line must come first"))
}

/// Parses a `Gpus=a,b` value: two distinct GPU indices below `n` (shared with the fake NVML's
/// fixture parser).
///
/// # Errors
/// A [`LineError`] for field `Gpus`.
pub fn parse_pair(line: usize, v: &str, n: usize) -> Result<(usize, usize), LineError> {
    let bad = || {
        LineError::new(
            line,
            "Gpus",
            format!("'{v}' is not two GPU indices below {n} like 0,3"),
        )
    };
    let (a, b) = v.split_once(',').ok_or_else(bad)?;
    let (a, b): (usize, usize) = (
        a.trim().parse().map_err(|_| bad())?,
        b.trim().parse().map_err(|_| bad())?,
    );
    if a >= n || b >= n || a == b {
        return Err(bad());
    }
    Ok((a, b))
}

/// Parses a PCIe level value (`SB`, `PIX`, .. `SYS`) of field `key`.
///
/// # Errors
/// A [`LineError`] naming the field.
pub fn level(line: usize, key: &str, v: &str) -> Result<PcieLevel, LineError> {
    PcieLevel::from_smi(v).ok_or_else(|| {
        LineError::new(
            line,
            key,
            format!("'{v}' is not one of SB, PIX, PXB, PHB, NODE, SYS"),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const RTX: &str = "# x\nNode Name=r Type=rtx8000 Gpus=4 SameSocket=NODE\n\
        Gpu Index=0 Socket=0 Cores=0-15\nGpu Index=1 Socket=0 Cores=0-15\n\
        Gpu Index=2 Socket=1 Cores=16-31\nGpu Index=3 Socket=1 Cores=16-31\n\
        NvLink Gpus=0,3 Count=2\nNvLink Gpus=1,2 Count=2\nPcie Gpus=0,1 Level=PIX\n";

    #[test]
    fn parses_and_round_trips() {
        let t = parse(RTX).unwrap();
        assert_eq!(t.len(), 4);
        assert_eq!(t.gpu_type.as_deref(), Some("rtx8000"));
        assert_eq!(t.link(0, 3).nvlinks, 2);
        assert_eq!(t.link(3, 0).pcie, PcieLevel::Sys);
        assert_eq!(t.link(0, 1).pcie, PcieLevel::Pix);
        assert_eq!(t.link(2, 3).pcie, PcieLevel::Node);
        assert_eq!(t.gpus()[2].cores.len(), 16);
        assert_eq!(parse(&render(&t)).unwrap(), t);
    }

    #[test]
    fn errors_name_line_and_field() {
        let e = parse("Node Name=x Gpus=2\nNvLink Gpus=0,5 Count=1\n").unwrap_err();
        assert_eq!((e.line, e.field.as_str()), (2, "Gpus"));
        let e = parse("Node Name=x Gpus=2\nGpu Index=0 Cores=a\n").unwrap_err();
        assert_eq!((e.line, e.field.as_str()), (2, "Cores"));
        let e = parse("Gpu Index=0\n").unwrap_err();
        assert_eq!(e.field, "Node");
        assert!(parse("").is_err());
        assert!(parse("Node Name=x Gpus=0").is_err());
    }
}

#[cfg(test)]
mod shipped_files {
    use super::parse;

    /// The topology files the local-cluster harness ships must parse, and DGX-1V must be the
    /// published hybrid cube-mesh.
    #[test]
    fn contrib_topologies_parse() {
        let dgx1v = parse(include_str!("../../../../contrib/topologies/dgx1v.topo")).unwrap();
        let want = [
            [0, 1, 1, 2, 2, 0, 0, 0],
            [1, 0, 2, 1, 0, 2, 0, 0],
            [1, 2, 0, 2, 0, 0, 1, 0],
            [2, 1, 2, 0, 0, 0, 0, 1],
            [2, 0, 0, 0, 0, 1, 1, 2],
            [0, 2, 0, 0, 1, 0, 2, 1],
            [0, 0, 1, 0, 1, 2, 0, 2],
            [0, 0, 0, 1, 2, 1, 2, 0],
        ];
        for (a, row) in want.iter().enumerate() {
            for (b, &w) in row.iter().enumerate() {
                if a != b {
                    assert_eq!(dgx1v.link(a, b).nvlinks, w, "pair {a},{b}");
                }
            }
        }
        for text in [
            include_str!("../../../../contrib/topologies/dgx1p.topo"),
            include_str!("../../../../contrib/topologies/hgx-h100.topo"),
            include_str!("../../../../contrib/topologies/pcie8.topo"),
        ] {
            assert_eq!(parse(text).unwrap().len(), 8);
        }
        let h100 = parse(include_str!("../../../../contrib/topologies/hgx-h100.topo")).unwrap();
        assert_eq!(h100.link(0, 7).nvlinks, 18);
        assert_eq!(
            parse(include_str!("../../../../contrib/topologies/pcie8.topo"))
                .unwrap()
                .max_nvlinks(),
            0
        );
    }
}
