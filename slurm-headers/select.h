/*
 * gputopo: the select-plugin view of Slurm (job/node/step records, GRES state, the
 * select_p_* argument types). Headers moved between releases, so the include set is
 * chosen by SLURM_VERSION_NUMBER (slurm/slurm_version.h, included by common.h):
 *   22.05: src/common/{select,gres}.h; job_record_t lives in src/slurmctld/slurmctld.h
 *   23.02+: src/interfaces/{select,gres}.h, src/common/node_conf.h
 *   24.05+: also src/common/job_record.h (23.11 keeps job_record_t in src/slurmctld/slurmctld.h)
 */
#ifndef GPUTOPO_SELECT_H
#define GPUTOPO_SELECT_H

#include "common.h"

#if SLURM_VERSION_NUMBER < 0x170200 /* 23.02.0; SLURM_VERSION_NUM() differs between trees */
#include "src/common/node_conf.h"
#include "src/common/gres.h"
#include "src/common/select.h"
#include "src/common/job_resources.h"
#include "src/slurmctld/slurmctld.h"
#else
#include "src/common/node_conf.h"
#if SLURM_VERSION_NUMBER >= 0x180500 /* 24.05.0 */
#include "src/common/job_record.h"
#endif
#include "src/common/job_resources.h"
#include "src/interfaces/gres.h"
#include "src/interfaces/select.h"
#include "src/slurmctld/slurmctld.h"
#endif

#endif
