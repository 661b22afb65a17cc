/*
 * gputopo: the priority-plugin view of Slurm (priority factors, association and QOS usage,
 * assoc_mgr and slurmctld locks, partition records). bindgen reads this file; nothing here is
 * compiled. 22.05 keeps the priority interface in src/common/slurm_priority.h, 23.02+ in
 * src/interfaces/priority.h. The `long double` fields of slurmdb_assoc_usage_t are never
 * touched from Rust: priority_shim.c reads and writes them.
 */
#ifndef GPUTOPO_PRIORITY_H
#define GPUTOPO_PRIORITY_H

#include "common.h"
#include "select.h"

#include "src/common/assoc_mgr.h"
#include "src/common/slurm_protocol_api.h"
#include "src/common/slurm_protocol_defs.h"
#include "src/slurmctld/locks.h"
#include "src/slurmctld/acct_policy.h"
#if SLURM_VERSION_NUMBER < 0x170200
#include "src/common/slurm_priority.h"
#else
#include "src/interfaces/priority.h"
#endif

#endif
