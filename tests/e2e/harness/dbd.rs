//! [`Slurmdbd`]: a private MariaDB + slurmdbd (`contrib/slurmdbd.sh`) next to the harness's
//! cluster directory, with the clusters a test registers and `sacctmgr` against it.
//!
//! One slurmdbd serves several clusters in turn (each `Cluster::up` of a test with its own
//! `ClusterName`): the association limits and QOS a test creates with [`Slurmdbd::sacctmgr`]
//! exist on every registered cluster, the jobs of each cluster stay apart in `sacct`, and the
//! database starts once per test instead of once per cluster (about 10-20 s each).

use std::path::PathBuf;
use std::process::Command;

use super::{cluster_dir, release, repo};

/// The installed `bin/` of a release (22.05.8: Debian's `/usr/bin`).
fn slurm_bin(release: &str) -> PathBuf {
    if release == "22.05.8" {
        PathBuf::from("/usr/bin")
    } else {
        PathBuf::from(
            std::env::var("GPUTOPO_CACHE").unwrap_or_else(|_| "/var/cache/gputopo".into()),
        )
        .join(format!("slurm-{release}/bin"))
    }
}

/// A running slurmdbd; dropping it stops it (MariaDB included).
pub struct Slurmdbd {
    dir: String,
    release: String,
    /// The slurm.conf lines of the first cluster (`ClusterName=` first).
    conf: String,
}

impl Slurmdbd {
    /// Starts MariaDB and slurmdbd for the harness's cluster directory (ports derived from it,
    /// so two shards never clash) and registers `clusters` (at least one).
    pub fn up(clusters: &[&str]) -> Slurmdbd {
        Slurmdbd::start(cluster_dir().display().to_string(), clusters)
    }

    /// As [`Slurmdbd::up`], in `DIR-<suffix>` beside the harness's cluster directory DIR (its
    /// own port block): a slurmdbd another test left for DIR is never this one.
    pub fn beside(suffix: &str, clusters: &[&str]) -> Slurmdbd {
        Slurmdbd::start(format!("{}-{suffix}", cluster_dir().display()), clusters)
    }

    fn start(dir: String, clusters: &[&str]) -> Slurmdbd {
        let release = release();
        stop(&dir);
        let out = Command::new(repo().join("contrib/slurmdbd.sh"))
            .args(["up", "--release", &release, "--dir", &dir, "--cluster"])
            .arg(clusters[0])
            .output()
            .expect("run contrib/slurmdbd.sh");
        assert!(
            out.status.success(),
            "slurmdbd.sh up: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let dbd = Slurmdbd {
            dir,
            release,
            conf: String::from_utf8_lossy(&out.stdout).into_owned(),
        };
        for c in &clusters[1..] {
            dbd.sacctmgr(&["add", "cluster", c]);
        }
        dbd
    }

    /// `sacctmgr -i ARGS` against this slurmdbd; panics with its stderr on failure.
    pub fn sacctmgr(&self, args: &[&str]) -> String {
        let o = Command::new(slurm_bin(&self.release).join("sacctmgr"))
            .arg("-i")
            .args(args)
            .env("SLURM_CONF", format!("{}.dbd/slurm.conf", self.dir))
            .output()
            .expect("run sacctmgr");
        assert!(
            o.status.success(),
            "sacctmgr {args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8_lossy(&o.stdout).into_owned()
    }

    /// The slurm.conf lines that point a cluster named `cluster` (registered by
    /// [`Slurmdbd::up`]) at this slurmdbd.
    pub fn conf(&self, cluster: &str) -> String {
        self.conf
            .lines()
            .map(|l| {
                if l.starts_with("ClusterName=") {
                    format!("ClusterName={cluster}\n")
                } else {
                    format!("{l}\n")
                }
            })
            .collect()
    }
}

impl Drop for Slurmdbd {
    fn drop(&mut self) {
        stop(&self.dir);
    }
}

fn stop(dir: &str) {
    let _ = Command::new(repo().join("contrib/slurmdbd.sh"))
        .args(["down", "--dir", dir])
        .output();
}
