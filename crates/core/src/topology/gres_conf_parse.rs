//! Reading one node's GPUs and NVLinks from a Slurm gres.conf.
//!
//! Sites already describe their GPUs in gres.conf, so `gputopo pick --topology gres.conf` and
//! the plugin can start from it. What we read, per `Name=gpu` line:
//! - `File=` gives the GRES index order (one GPU per path; `/dev/nvidia[0-3]` expands) and
//!   each GPU's device minor number ([`super::Gpu::minor`]: the digits ending the path,
//!   `/dev/nvidia3` → 3), which is how the node agent matches Slurm's GPUs to NVML devices;
//! - `Type=`, `Cores=` (CPU affinity; GPUs with the same `Cores=` are taken as one socket);
//! - `Links=` (NVLink count to every GPU of the node, -1 for itself), validated: one entry per
//!   GPU, -1 exactly at the GPU's own index, numbers ≥ 0 elsewhere, and symmetric (an
//!   asymmetric pair is an error naming the later of the two lines).
//!
//! Which lines apply to the node comes from the one line reader, [`super::gres_conf_lines`]
//! (`NodeName=` host lists like `n[1-4],gpu07`; without a requested node the file must describe
//! a single node). `AutoDetect=` and non-GPU GRES lines (`Name=mps`, `Name=shard`, ...) are
//! ignored.
//!
//! The model itself comes from the one GRES constructor, [`super::gres_model::from_gres`]
//! (the plugin uses it too): gres.conf has no PCIe paths, so pairs sharing `Cores=` get
//! `NODE`, others `SYS`.
//! Every problem is a [`LineError`] naming the line and key; no input panics.

use super::NodeTopology;
use super::gres_conf_lines::{minor_of, node_lines};
use super::gres_model::{GresGpu, from_gres};
use crate::gpuset::MAX_GPUS;
use crate::keyvalue::LineError;

/// Parses the GPUs of `node` (or of the only node described) from gres.conf text.
///
/// # Errors
/// [`LineError`] for malformed lines, bad `Cores=`/`Links=`/`File=`, no GPU line for the node,
/// several nodes without `node`, or more than [`MAX_GPUS`] GPUs.
pub fn parse(text: &str, node: Option<&str>) -> Result<NodeTopology, LineError> {
    parse_if_any(text, node)?.ok_or_else(|| {
        let what = node.map_or(String::new(), |n| format!(" for node '{n}'"));
        LineError::new(1, "Name", format!("no Name=gpu line{what}"))
    })
}

/// [`parse`], but `Ok(None)` when the text has no `Name=gpu` line for the node (a gres.conf
/// with only `AutoDetect=` or other GRES is not an error to callers that can do without it).
///
/// # Errors
/// As [`parse`], except for the missing GPU line.
pub fn parse_if_any(text: &str, node: Option<&str>) -> Result<Option<NodeTopology>, LineError> {
    let lines = node_lines(text, node)?;
    let mut gpus: Vec<GpuLine> = Vec::new();
    for g in &lines.gpus {
        let line = g.line;
        if let Some(p) = g.words.iter().find(|p| !p.has_value) {
            return Err(LineError::new(line, p.key, "expected Key=Value"));
        }
        let Some(files) = g.files()? else {
            return Err(LineError::new(
                line,
                "File",
                "missing (needed for GPU order)",
            ));
        };
        let cores = match g.get("Cores") {
            Some(c) => crate::cpulist::parse_members(c, 1 << 16)
                .map_err(|m| LineError::new(line, "Cores", m))?,
            None => Vec::new(),
        };
        let links = match g.get("Links") {
            Some(l) => {
                if files.len() != 1 {
                    return Err(LineError::new(
                        line,
                        "Links",
                        "Links= needs a line per GPU (one File= path)",
                    ));
                }
                Some(parse_links(line, l)?)
            }
            None => None,
        };
        let type_name = g.get("Type").map(str::to_string);
        for f in &files {
            if gpus.len() >= MAX_GPUS {
                return Err(LineError::new(
                    line,
                    "File",
                    format!("more than {MAX_GPUS} GPUs"),
                ));
            }
            gpus.push(GpuLine {
                line,
                type_name: type_name.clone(),
                minor: minor_of(f),
                cores: cores.clone(),
                links: links.clone(),
            });
        }
    }
    if gpus.is_empty() {
        return Ok(None);
    }
    build(node, lines.node_name, &gpus).map(Some)
}

struct GpuLine {
    line: usize,
    type_name: Option<String>,
    minor: Option<u32>,
    cores: Vec<u32>,
    links: Option<Vec<i64>>,
}

/// Validates the `Links=` of every line (errors name the line), then builds the model with
/// the one GRES constructor.
fn build(
    node: Option<&str>,
    node_names: Option<String>,
    lines: &[GpuLine],
) -> Result<NodeTopology, LineError> {
    let n = lines.len();
    for (a, g) in lines.iter().enumerate() {
        let Some(links) = &g.links else { continue };
        if links.len() != n {
            return Err(LineError::new(
                g.line,
                "Links",
                format!("{} entries, but the node has {n} GPUs", links.len()),
            ));
        }
        for (b, &v) in links.iter().enumerate() {
            if b == a {
                if v != -1 {
                    return Err(LineError::new(
                        g.line,
                        "Links",
                        format!("entry {b} is this GPU itself and must be -1, not {v}"),
                    ));
                }
                continue;
            }
            if v < 0 {
                return Err(LineError::new(
                    g.line,
                    "Links",
                    format!("entry {b} is {v}; only the GPU's own entry may be -1"),
                ));
            }
            if b < a {
                let other = &lines[b];
                let back = other.links.as_ref().and_then(|l| l.get(a)).copied();
                if let Some(back) = back {
                    if back != v {
                        return Err(LineError::new(
                            g.line,
                            "Links",
                            format!(
                                "asymmetric: GPU {a} lists {v} links to GPU {b}, but GPU {b} (line {}) lists {back}",
                                other.line
                            ),
                        ));
                    }
                }
            }
        }
    }
    let name = node
        .map(str::to_string)
        .or(node_names)
        .unwrap_or_else(|| "gres.conf".to_string());
    let gres: Vec<GresGpu> = lines
        .iter()
        .map(|g| GresGpu {
            type_name: g.type_name.clone(),
            cores: Some(g.cores.clone()),
            links: g.links.clone(),
            minor: g.minor,
        })
        .collect();
    from_gres(name, &gres).map_err(|e| LineError::new(lines[0].line, "File", e.to_string()))
}

fn parse_links(line: usize, v: &str) -> Result<Vec<i64>, LineError> {
    v.split(',')
        .map(|x| {
            x.trim()
                .parse::<i64>()
                .map_err(|_| LineError::new(line, "Links", format!("'{x}' is not a number")))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::nvlink_matrix;
    use crate::topology::PcieLevel;
    use crate::topology::gres_conf_lines::expand_hostlist;
    use proptest::prelude::*;

    const DGX1V: &str = include_str!("../../../../tests/fixtures/topologies/dgx1v-gres.conf");

    #[test]
    fn reads_the_shipped_sample_like_the_fixture() {
        let t = parse(DGX1V, Some("dgx03")).unwrap();
        let f = crate::fixtures::dgx1v();
        assert_eq!(t.len(), 8);
        assert_eq!(t.gpu_type.as_deref(), Some("v100"));
        assert_eq!(nvlink_matrix(&t), nvlink_matrix(&f));
        for a in 0..8 {
            assert_eq!(t.gpus()[a].cores, f.gpus()[a].cores);
        }
        assert_eq!(t.link(0, 1).pcie, PcieLevel::Node);
        assert_eq!(t.link(0, 4).pcie, PcieLevel::Sys);
        // The other node in the file has 4 GPUs.
        assert_eq!(parse(DGX1V, Some("small1")).unwrap().len(), 4);
        let e = parse(DGX1V, None).unwrap_err();
        assert_eq!(e.field, "NodeName");
        assert!(parse(DGX1V, Some("nope")).is_err());
    }

    #[test]
    fn links_are_validated_with_line_and_field() {
        let ok = "Name=gpu File=/dev/nvidia0 Links=-1,2\nName=gpu File=/dev/nvidia1 Links=2,-1\n";
        assert_eq!(parse(ok, None).unwrap().link(0, 1).nvlinks, 2);
        let cases = [
            (
                "Name=gpu File=/dev/nvidia0 Links=-1,2\nName=gpu File=/dev/nvidia1 Links=1,-1\n",
                2,
            ),
            (
                "Name=gpu File=/dev/nvidia0 Links=-1,2,0\nName=gpu File=/dev/nvidia1 Links=2,-1\n",
                1,
            ),
            (
                "Name=gpu File=/dev/nvidia0 Links=0,2\nName=gpu File=/dev/nvidia1 Links=2,-1\n",
                1,
            ),
            (
                "Name=gpu File=/dev/nvidia0 Links=-1,-1\nName=gpu File=/dev/nvidia1 Links=-1,-1\n",
                1,
            ),
            ("Name=gpu File=/dev/nvidia0 Links=-1,x\n", 1),
        ];
        for (text, line) in cases {
            let e = parse(text, None).unwrap_err();
            assert_eq!((e.line, e.field.as_str()), (line, "Links"), "{text}: {e}");
        }
        let e = parse("Name=gpu File=/dev/nvidia0 Cores=z\n", None).unwrap_err();
        assert_eq!((e.line, e.field.as_str()), (1, "Cores"));
    }

    #[test]
    fn ranges_autodetect_and_other_gres() {
        let t = parse(
            "AutoDetect=off\nName=mps Count=100\nNodeName=n[1-4] Name=gpu Type=a100 File=/dev/nvidia[0-3] Cores=0-7\n",
            Some("n3"),
        )
        .unwrap();
        assert_eq!((t.len(), t.name.as_str()), (4, "n3"));
        let minors: Vec<_> = t.gpus().iter().map(|g| g.minor).collect();
        assert_eq!(minors, [Some(0), Some(1), Some(2), Some(3)]);
        let t = parse(
            "Name=gpu File=/dev/nvidia12
Name=gpu File=/dev/gpu
",
            None,
        )
        .unwrap();
        assert_eq!((t.gpus()[0].minor, t.gpus()[1].minor), (Some(12), None));
        assert_eq!(minor_of("/dev/nvidia99999999999"), None);
        assert_eq!(
            parse_if_any(
                "AutoDetect=nvml
Name=mps Count=4
",
                None
            ),
            Ok(None)
        );
        assert_eq!(
            parse_if_any(
                "Name=gpu File=/dev/x1
",
                Some("n1")
            )
            .unwrap()
            .map(|t| t.len()),
            Some(1)
        );
        assert_eq!(
            expand_hostlist("n[01-03],x,y[5]").unwrap(),
            ["n01", "n02", "n03", "x", "y5"]
        );
        assert!(expand_hostlist("n[1-").is_err());
        assert!(expand_hostlist("n[3-1]").is_err());
        assert!(expand_hostlist("n[0-99999999]").is_err());
    }

    proptest! {
        #[test]
        fn never_panics(text in "\\PC{0,200}", node in proptest::option::of("[a-z0-9\\[\\]-]{0,8}")) {
            let _ = parse(&text, node.as_deref());
        }

        #[test]
        fn never_panics_on_gres_like_lines(lines in proptest::collection::vec(
            "(NodeName=n\\[[0-9,-]{0,4}\\] )?Name=(gpu|mps) (File=/dev/nvidia[0-9\\[\\]-]{0,4} )?(Cores=[0-9,-]{0,5} )?(Links=[-0-9,]{0,12})?",
            0..6,
        )) {
            let _ = parse(&lines.join("\n"), Some("n1"));
            let _ = parse(&lines.join("\n"), None);
        }
    }
}
