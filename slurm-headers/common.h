/*
 * gputopo: what every gputopo role needs from Slurm (logging, bitmaps, lists, memory,
 * slurm_conf, "am I slurmctld"). bindgen reads this file; nothing here is compiled into
 * the plugin. Included the way a stock plugin includes Slurm: config.h first, then
 * slurm_xlator.h (which renames bit_*, list_*, log_var... to their exported slurm_*
 * aliases, so the bindings name the symbols libslurmfull really exports).
 */
#ifndef GPUTOPO_COMMON_H
#define GPUTOPO_COMMON_H

#include "config.h"

/* configure defines this on every non-Darwin host; fetch-slurm.sh trees have an empty config.h. */
#ifndef USE_ALIAS
#define USE_ALIAS 1
#endif

#include <stdbool.h>
#include <stdint.h>

#include "slurm/slurm_version.h"
#include "slurm/slurm.h"
#include "slurm/slurm_errno.h"
#include "src/common/slurm_xlator.h"
#include "src/common/bitstring.h"
#include "src/common/list.h"
#include "src/common/log.h"
#include "src/common/read_config.h"
#include "src/common/run_in_daemon.h"
#include "src/common/xmalloc.h"

#endif
