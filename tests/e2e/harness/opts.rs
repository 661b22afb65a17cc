//! [`Opts`]: what cluster a test starts (topology, releases, select and priority plugins,
//! gres.conf variants, extra slurm.conf lines), with the environment's defaults.

use super::{release, select};
use std::path::PathBuf;

/// What cluster to start. `Opts::default()` is one DGX-1V node with the release and select
/// plugin chosen by the environment.
#[derive(Debug, Clone)]
pub struct Opts {
    /// Slurm release (a `release` of slurm-headers/releases.tsv, or a site's own).
    pub release: String,
    /// Number of emulated nodes n1..nN.
    pub nodes: u32,
    /// Topology name in contrib/topologies/ (e.g. "dgx1v", "hgx-h100") or a file path.
    pub topology: String,
    /// "gputopo" or "cons_tres".
    pub select: String,
    /// "basic", "multifactor" or "gputopo".
    pub priority: String,
    /// slurm.conf lines; each replaces a generated line with the same key.
    pub extra_conf: Option<String>,
    /// Content of gputopo.conf (next to slurm.conf).
    pub gputopo_conf: Option<String>,
    /// HealthCheckProgram and its interval in seconds.
    pub health_program: Option<PathBuf>,
    pub health_interval: u32,
    /// SlurmctldDebug=debug (the plugin's per-call lines are at debug level).
    pub debug: bool,
    /// Content of etc/fake_gpus.conf, slurmd's system GPU list instead of NVML
    /// (`contrib/cluster.sh --fake-gpus`): `@DIR@` is the cluster directory, `@DEV@` n1's fake
    /// device directory.
    pub fake_gpus: Option<String>,
    /// gres.conf without `Cores=` and `Links=` (cluster.sh --plain-gres).
    pub plain_gres: bool,
    /// A gres.conf replacing the generated one, and the nodes' `Gres=` in slurm.conf
    /// (`contrib/cluster.sh --gres-conf`/`--node-gres`: each line is written per node, `@DEV@`
    /// being the node's fake device directory).
    pub gres_conf: Option<(String, String)>,
    /// Other topologies for some nodes (`n2=l40s-pcie8,n3=...`): a mixed fleet.
    pub node_topology: Option<String>,
    /// Slurm `Weight=` of some nodes (`n1=10,n2=1`).
    pub node_weight: Option<String>,
    /// Another `Gres=` for some nodes than `gres_conf`'s (`n2=gpu:8`; values without commas).
    pub node_gres_of: Option<String>,
    /// Keys added to every node's `NodeName=` line (`RestrictedCoresPerGPU=2`;
    /// `cluster.sh --node-keys`).
    pub node_keys: Option<String>,
    /// Command words put in front of every slurmctld start (`env GLIBC_TUNABLES=...`,
    /// `valgrind ...`): cluster.sh's GPUTOPO_SLURMCTLD_PREFIX.
    pub slurmctld_prefix: Option<String>,
    /// A backup controller (a second `SlurmctldHost`) in standby (`cluster.sh --backup`).
    pub backup: bool,
    /// Nodes whose slurmd sees a fake NVML's GPUs (`n1=FIXTURE,...`, `cluster.sh --nvml`):
    /// with `AutoDetect=nvml` in gres.conf, Slurm's own gpu/nvml plugin detects them.
    pub nvml: Option<String>,
    /// Another build of the plugin than `GPUTOPO_PLUGIN_SO` (e.g. the `test-panic` one).
    pub plugin_so: Option<PathBuf>,
}

impl Default for Opts {
    fn default() -> Self {
        Opts {
            release: release(),
            nodes: 1,
            topology: "dgx1v".into(),
            select: select(),
            priority: "basic".into(),
            extra_conf: None,
            gputopo_conf: None,
            health_program: None,
            health_interval: 60,
            debug: false,
            fake_gpus: None,
            plain_gres: false,
            gres_conf: None,
            node_topology: None,
            node_weight: None,
            node_gres_of: None,
            node_keys: None,
            slurmctld_prefix: None,
            backup: false,
            nvml: None,
            plugin_so: None,
        }
    }
}
