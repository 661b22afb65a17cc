//! The one constructor of a node's model from Slurm's GRES facts.
//!
//! A node's GPUs reach gputopo as gres.conf text (`gputopo pick --topology gres.conf`, the
//! simulator) and as slurmctld's GRES records (the select plugin). Both carry the same facts
//! per GPU: a type name, a core list (`Cores=`) or none, and NVLink counts (`Links=`) or none.
//! Both feed [`from_gres`], so `gputopo pick`, the simulator and slurmctld model a node the
//! same way. Earlier the plugin numbered sockets by `first core / cores per socket` and gave
//! same-socket pairs `PHB`, while the gres.conf reader grouped GPUs by identical `Cores=` and
//! gave them `NODE`: the same node, two models.
//!
//! The rules (GRES data has no PCIe paths):
//! - **Socket**: GPUs with the same core list are one affinity group (numbered in order of
//!   first appearance); a GPU without a core list has no known socket.
//! - **PCIe level**: `NODE` within a group, or when either side is unknown; `SYS` across
//!   groups. With the engine's pair values these only matter between GPUs without NVLink.
//! - **NVLinks**: `links[b]` of GPU `a` (negative entries and the GPU's own entry ignored); a
//!   pair listed differently by its two ends takes the smaller count, so that a misreported
//!   link never promises bandwidth that one side denies. The gres.conf reader rejects such
//!   files with the line number before it gets here; slurmctld's records are taken as they are.
//! - **Type**: the first type name given becomes the node's `gpu_type`.

use super::{Gpu, NodeTopology, PcieLevel, TopologyError};

/// One GPU as GRES describes it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GresGpu {
    /// GRES type name (`Type=`), if any.
    pub type_name: Option<String>,
    /// Cores with affinity (`Cores=`), if given.
    pub cores: Option<Vec<u32>>,
    /// NVLink count to every GPU of the node, by index (`Links=`; -1 for itself), if given.
    pub links: Option<Vec<i64>>,
    /// Device minor number (from `File=`), if known.
    pub minor: Option<u32>,
}

/// Builds the model of node `name` from its GPUs in GRES index order (see the module docs).
///
/// # Errors
/// [`TopologyError::GpuCount`] for no GPU or too many.
pub fn from_gres(name: impl Into<String>, gres: &[GresGpu]) -> Result<NodeTopology, TopologyError> {
    let mut groups: Vec<&[u32]> = Vec::new();
    let gpus = gres
        .iter()
        .enumerate()
        .map(|(index, g)| {
            let cores = g.cores.as_deref().filter(|c| !c.is_empty());
            let socket = cores.map(|c| {
                let pos = groups.iter().position(|x| *x == c);
                pos.unwrap_or_else(|| {
                    groups.push(c);
                    groups.len() - 1
                }) as u32
            });
            Gpu {
                index,
                socket,
                cores: cores.map(<[u32]>::to_vec).unwrap_or_default(),
                minor: g.minor,
                ..Gpu::default()
            }
        })
        .collect();
    let mut topo = NodeTopology::new(name, gpus, PcieLevel::Node)?;
    topo.gpu_type = gres.iter().find_map(|g| g.type_name.clone());
    let count = |a: usize, b: usize| -> u8 {
        let v = gres[a]
            .links
            .as_ref()
            .and_then(|l| l.get(b))
            .copied()
            .unwrap_or(0);
        u8::try_from(v.max(0)).unwrap_or(u8::MAX)
    };
    let n = gres.len();
    for a in 0..n {
        for b in a + 1..n {
            let nv = match (gres[a].links.is_some(), gres[b].links.is_some()) {
                (true, true) => count(a, b).min(count(b, a)),
                (true, false) => count(a, b),
                (false, true) => count(b, a),
                (false, false) => 0,
            };
            if nv > 0 {
                topo.set_nvlinks(a, b, nv)?;
            }
        }
    }
    Ok(topo)
}

/// [`from_gres`] on the form slurmctld holds a node's GRES in (the select plugin's input):
/// per GPU its core list (empty = none given) and, when any `Links=` was given, the link
/// matrix by GRES index.
///
/// # Errors
/// As [`from_gres`].
pub fn from_slurm(
    name: impl Into<String>,
    cores: &[Vec<u32>],
    links: Option<&[Vec<i32>]>,
) -> Result<NodeTopology, TopologyError> {
    let gres: Vec<GresGpu> = cores
        .iter()
        .enumerate()
        .map(|(index, c)| GresGpu {
            cores: Some(c.clone()),
            links: links
                .and_then(|l| l.get(index))
                .map(|row| row.iter().map(|&v| i64::from(v)).collect()),
            ..GresGpu::default()
        })
        .collect();
    from_gres(name, &gres)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_by_core_list_and_takes_the_smaller_of_two_link_counts() {
        let g = |cores: Option<Vec<u32>>, links: Option<Vec<i64>>| GresGpu {
            type_name: Some("v100".into()),
            cores,
            links,
            minor: None,
        };
        let t = from_gres(
            "n1",
            &[
                g(Some(vec![0, 1]), Some(vec![-1, 2, 0])),
                g(Some(vec![0, 1]), Some(vec![1, -1, 0])),
                g(Some(vec![2, 3]), None),
                g(None, None),
            ],
        )
        .unwrap();
        assert_eq!(t.gpu_type.as_deref(), Some("v100"));
        assert_eq!(t.gpus()[2].socket, Some(1));
        assert_eq!(t.gpus()[3].socket, None);
        assert_eq!(t.link(0, 1).nvlinks, 1);
        assert_eq!(t.link(0, 1).pcie, PcieLevel::Node);
        assert_eq!(t.link(0, 2).pcie, PcieLevel::Sys);
        assert_eq!(t.link(2, 3).pcie, PcieLevel::Node);
        assert!(from_gres("none", &[]).is_err());
    }

    /// The CLI and the simulator (gres.conf text through `detect::read`) and the plugin
    /// (slurmctld's per-GPU cores and link matrix through [`from_slurm`]) build the same model
    /// and make the same choices, for every shipped topology rendered as gres.conf, with and
    /// without `Cores=` and `Links=`.
    #[test]
    fn gres_conf_and_slurm_records_give_one_model() {
        use crate::placement::{Gputopo, Policy, Request};
        use crate::topology::{detect, gres_conf};
        let engine = Gputopo::new();
        for (name, fixture) in crate::fixtures::all() {
            let text = gres_conf::render(&fixture, Some("n1"), |i| format!("/dev/nvidia{i}"));
            let strip = |key: &str| -> String {
                text.lines()
                    .map(|l| {
                        l.split(' ')
                            .filter(|w| !w.starts_with(key))
                            .collect::<Vec<_>>()
                            .join(" ")
                    })
                    .collect::<Vec<_>>()
                    .join("\n")
            };
            for (variant, conf) in [
                ("full", text.clone()),
                ("no Cores=", strip("Cores=")),
                ("no Links=", strip("Links=")),
            ] {
                let (_, mut cli) = detect::read(&conf, Some("n1")).unwrap();
                let cores: Vec<Vec<u32>> = cli.gpus().iter().map(|g| g.cores.clone()).collect();
                let links: Option<Vec<Vec<i32>>> = conf.contains("Links=").then(|| {
                    (0..cli.len())
                        .map(|a| {
                            (0..cli.len())
                                .map(|b| {
                                    if a == b {
                                        -1
                                    } else {
                                        i32::from(fixture.link(a, b).nvlinks)
                                    }
                                })
                                .collect()
                        })
                        .collect()
                });
                let plugin = from_slurm("n1", &cores, links.as_deref()).unwrap();
                // Slurm keeps type names apart from this record; minors come from File=.
                cli.gpu_type = None;
                for g in 0..cli.len() {
                    if let Some(x) = cli.gpu_mut(g) {
                        x.minor = None;
                    }
                }
                assert_eq!(cli, plugin, "{name} {variant}");
                for k in 1..=cli.len().min(8) {
                    let free = cli.all().without(0);
                    let req = Request::new(k);
                    assert_eq!(
                        engine.choose(&cli, free, &req),
                        engine.choose(&plugin, free, &req),
                        "{name} {variant} k={k}"
                    );
                }
            }
        }
    }
}
