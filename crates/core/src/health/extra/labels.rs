//! Capability labels: static facts about a node's GPUs, published as flat keys in `Extra`
//! (for Slurm 24.11+'s `--extra`) and printed as slurm.conf `Features=` (for `--constraint`,
//! every release) by `gputopo features`.
//!
//! | Key | JSON type | Meaning |
//! |---|---|---|
//! | `gpu_model` | string | short model (`H100`, `A100`, `V100`; `mixed` when the node's GPUs differ) |
//! | `gpu_mem_gib` | number | memory per GPU in GiB, rounded (the smallest GPU's) |
//! | `cc` | number | CUDA compute capability (`9.0`; the lowest GPU's) |
//! | `gpu_count` | number | GPUs in Slurm's list |
//! | `nvlink` | bool | some GPU has an active NVLink |
//! | `nvswitch` | bool | some NVLink goes to an NVSwitch |
//! | `nvlink_domain` | string | the multi-node NVLink domain: fabric cluster UUID `.` clique id (GB200 NVL72) |
//!
//! Why these rules: `--extra` compares numbers as numbers and strings byte-wise, and its keys
//! and values may not contain `, & | < > = ! ( )` (../shared/docs/slurm-25-26-port.md §5), so
//! the model is a short, plain token and memory and capability are numbers
//! (`--extra='gpu_mem_gib>=80&cc>=9.0'`). A job needs every GPU it gets to qualify, hence the
//! minimum over the node. The labels change only with the hardware, so they never make the
//! agent rewrite `Extra` by themselves (frequent changes would hurt backfill).

use serde_json::Value;

/// What NVML says about one GPU (`None` where it could not be read).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct GpuFacts {
    /// Product name (`NVIDIA H100 80GB HBM3`).
    pub name: Option<String>,
    /// Total memory in bytes.
    pub mem_bytes: Option<u64>,
    /// CUDA compute capability (major, minor).
    pub cc: Option<(u32, u32)>,
}

/// A node's labels.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Labels {
    /// Short model, `mixed` when GPUs differ.
    pub model: Option<String>,
    /// Memory per GPU, GiB (rounded; smallest).
    pub mem_gib: Option<u64>,
    /// Compute capability as major.minor (lowest).
    pub cc: Option<(u32, u32)>,
    /// GPUs in Slurm's list.
    pub count: usize,
    /// Some GPU has an active NVLink.
    pub nvlink: bool,
    /// Some NVLink goes to an NVSwitch.
    pub nvswitch: bool,
    /// Multi-node NVLink domain (`<cluster uuid hex>.<clique>`), when the GPUs registered
    /// with a fabric; the first GPU's.
    pub nvlink_domain: Option<String>,
}

/// The label keys (gputopo owns them, like the health summary keys).
pub const KEYS: &[&str] = &[
    "gpu_model",
    "gpu_mem_gib",
    "cc",
    "gpu_count",
    "nvlink",
    "nvswitch",
    "nvlink_domain",
];

/// The short model of a product name: vendor words dropped, the first word up to a `-`
/// (`Tesla V100-SXM2-32GB` → `V100`, `NVIDIA H100 80GB HBM3` → `H100`), only `[A-Za-z0-9_.]`.
pub fn short_model(name: &str) -> Option<String> {
    let word = name.split_whitespace().find(|w| {
        !matches!(
            w.to_ascii_lowercase().as_str(),
            "nvidia" | "tesla" | "quadro"
        )
    })?;
    let short: String = word
        .split('-')
        .next()
        .unwrap_or("")
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '.')
        .collect();
    (!short.is_empty()).then_some(short)
}

/// Longest label value the generators accept.
pub const MAX_LABEL_LEN: usize = 64;

/// True when `v` may appear in a generated config line: 1 to [`MAX_LABEL_LEN`] characters of
/// `[A-Za-z0-9_.-]`, what the agent itself writes ([`short_model`], the fabric id
/// `<hex>.<clique>`). Labels are read back from `Extra`, which anyone allowed to update a
/// node can set: a newline, a space, a `,` or a `=` would become a line or a key of its own
/// in slurm.conf or topology.conf.
pub fn valid_label(v: &str) -> bool {
    !v.is_empty()
        && v.len() <= MAX_LABEL_LEN
        && v.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
}

/// A string label of `obj` when it passes [`valid_label`].
pub fn label_str(obj: &serde_json::Map<String, Value>, key: &str) -> Option<String> {
    obj.get(key)
        .and_then(Value::as_str)
        .filter(|v| valid_label(v))
        .map(str::to_string)
}

impl Labels {
    /// The labels of `gpus` (the ones NVML answered for), a node of `count` Slurm GPUs.
    pub fn new(gpus: &[GpuFacts], count: usize, nvlink: bool, nvswitch: bool) -> Labels {
        let mut models = gpus
            .iter()
            .filter_map(|g| g.name.as_deref())
            .map(short_model);
        let first = models.next().flatten();
        let model = if models.all(|m| m == first) {
            first
        } else {
            Some("mixed".into())
        };
        const GIB: u64 = 1 << 30;
        Labels {
            model,
            mem_gib: gpus
                .iter()
                .filter_map(|g| g.mem_bytes)
                .map(|b| (b + GIB / 2) / GIB)
                .min(),
            cc: gpus.iter().filter_map(|g| g.cc).min(),
            count,
            nvlink,
            nvswitch,
            nvlink_domain: None,
        }
    }

    /// These labels with the NVLink domain of fabric `(cluster uuid hex, clique id)`.
    pub fn with_domain(mut self, fabric: Option<(&str, u32)>) -> Labels {
        self.nvlink_domain = fabric.map(|(uuid, clique)| format!("{uuid}.{clique}"));
        self
    }

    /// The flat keys, in [`KEYS`] order; facts that are unknown are left out.
    pub fn to_flat(&self) -> Vec<(&'static str, Value)> {
        let mut out = Vec::with_capacity(KEYS.len());
        if let Some(m) = &self.model {
            out.push(("gpu_model", Value::from(m.as_str())));
        }
        if let Some(g) = self.mem_gib {
            out.push(("gpu_mem_gib", Value::from(g)));
        }
        if let Some((major, minor)) = self.cc {
            let cc = f64::from(major) + f64::from(minor.min(9)) / 10.0;
            out.push(("cc", Value::from(cc)));
        }
        out.push(("gpu_count", Value::from(self.count)));
        out.push(("nvlink", Value::from(self.nvlink)));
        out.push(("nvswitch", Value::from(self.nvswitch)));
        if let Some(d) = &self.nvlink_domain {
            out.push(("nvlink_domain", Value::from(d.as_str())));
        }
        out
    }

    /// Reads the labels back from flat keys (what `gputopo features` does with `Extra`);
    /// a string label that fails [`valid_label`] is left out.
    pub fn from_flat(obj: &serde_json::Map<String, Value>) -> Option<Labels> {
        let count = obj.get("gpu_count")?.as_u64()? as usize;
        let cc = obj.get("cc").and_then(Value::as_f64).map(|c| {
            let tenths = (c * 10.0).round() as u32;
            (tenths / 10, tenths % 10)
        });
        Some(Labels {
            model: label_str(obj, "gpu_model"),
            mem_gib: obj.get("gpu_mem_gib").and_then(Value::as_u64),
            cc,
            count,
            nvlink: obj.get("nvlink").and_then(Value::as_bool).unwrap_or(false),
            nvswitch: obj
                .get("nvswitch")
                .and_then(Value::as_bool)
                .unwrap_or(false),
            nvlink_domain: label_str(obj, "nvlink_domain"),
        })
    }

    /// slurm.conf node features for `--constraint` (every release): `h100`, `gpumem80`,
    /// `cc90`, `nvlink`, `nvswitch` (lowercase; features cannot compare, so one per value).
    pub fn features(&self) -> Vec<String> {
        let mut f = Vec::new();
        if let Some(m) = &self.model {
            f.push(m.to_ascii_lowercase().replace('.', "_"));
        }
        if let Some(g) = self.mem_gib {
            f.push(format!("gpumem{g}"));
        }
        if let Some((major, minor)) = self.cc {
            f.push(format!("cc{major}{}", minor.min(9)));
        }
        if self.nvlink {
            f.push("nvlink".into());
        }
        if self.nvswitch {
            f.push("nvswitch".into());
        }
        f
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gpu(name: &str, mib: u64, cc: (u32, u32)) -> GpuFacts {
        GpuFacts {
            name: Some(name.into()),
            mem_bytes: Some(mib << 20),
            cc: Some(cc),
        }
    }

    #[test]
    fn models_memory_and_capability_from_nvml_facts() {
        assert_eq!(
            short_model("NVIDIA H100 80GB HBM3").as_deref(),
            Some("H100")
        );
        assert_eq!(short_model("Tesla V100-SXM2-16GB").as_deref(), Some("V100"));
        assert_eq!(
            short_model("NVIDIA A100-SXM4-80GB").as_deref(),
            Some("A100")
        );
        assert_eq!(short_model("NVIDIA"), None);
        let h100 = gpu("NVIDIA H100 80GB HBM3", 81559, (9, 0));
        let l = Labels::new(&[h100.clone(), h100.clone()], 2, true, true);
        assert_eq!(
            serde_json::to_string(&serde_json::Map::from_iter(
                l.to_flat().into_iter().map(|(k, v)| (k.to_string(), v))
            ))
            .unwrap(),
            r#"{"cc":9.0,"gpu_count":2,"gpu_mem_gib":80,"gpu_model":"H100","nvlink":true,"nvswitch":true}"#
        );
        assert_eq!(
            l.features(),
            ["h100", "gpumem80", "cc90", "nvlink", "nvswitch"]
        );
        let obj = l
            .to_flat()
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect();
        assert_eq!(Labels::from_flat(&obj), Some(l.clone()));
        let gb = l.with_domain(Some(("00ff", 3)));
        assert_eq!(
            gb.to_flat().last(),
            Some(&("nvlink_domain", Value::from("00ff.3")))
        );
    }

    #[test]
    fn a_mixed_node_gets_its_weakest_gpu() {
        let v100 = gpu("Tesla V100-SXM2-16GB", 16160, (7, 0));
        let a100 = gpu("NVIDIA A100-SXM4-80GB", 81920, (8, 0));
        let lost = GpuFacts::default();
        let l = Labels::new(&[a100, v100, lost], 3, false, false);
        assert_eq!(
            (l.model.as_deref(), l.mem_gib, l.cc),
            (Some("mixed"), Some(16), Some((7, 0)))
        );
        let none = Labels::new(&[], 4, false, false);
        assert_eq!(
            none.to_flat(),
            [
                ("gpu_count", Value::from(4)),
                ("nvlink", Value::from(false)),
                ("nvswitch", Value::from(false))
            ]
        );
    }

    proptest::proptest! {
        /// Whatever strings `Extra` holds for the labels, every generated feature is one
        /// token of `[a-z0-9_.-]` (no line, key or list separator of slurm.conf), and the
        /// generated topology.conf has exactly its header, two lines per domain and the
        /// comment for nodes without one.
        #[test]
        fn labels_read_back_never_break_a_config_line(
            model in ".{0,80}",
            domain in ".{0,80}",
            cc in proptest::num::f64::ANY,
            mem in proptest::num::u64::ANY,
        ) {
            let obj = serde_json::json!({
                "gpu_model": model, "nvlink_domain": domain, "cc": cc, "gpu_mem_gib": mem,
                "gpu_count": 4, "nvlink": true,
            });
            let Some(l) = Labels::from_flat(obj.as_object().expect("object")) else {
                return Ok(());
            };
            for f in l.features() {
                proptest::prop_assert!(
                    !f.is_empty()
                        && f.chars().all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c)),
                    "feature {:?}", f
                );
            }
            let nodes = vec![
                ("a1".to_string(), l.nvlink_domain.clone()),
                ("a2".to_string(), None),
            ];
            let conf = crate::topology::block_conf::block_conf(&nodes);
            let want = 1 + 2 * usize::from(l.nvlink_domain.is_some()) + 1;
            proptest::prop_assert_eq!(conf.lines().count(), want, "{}", conf);
        }
    }
}
