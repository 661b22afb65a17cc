"""pytest plugin of the parity gate (contrib/slurm-testsuite.sh): gputopo's plugins stand in for
the stock plugins the tests require.

Slurm's ATF tests declare `require_config_parameter("SelectType", "select/cons_tres")` and
`require_config_parameter("PriorityType", "priority/multifactor")`. gputopo is a drop-in for
those two: with `select/gputopo_cons_tres` (or `priority/gputopo`) configured, a test would skip
in --local-config mode and, in --auto-config mode, switch the cluster back to the stock plugin,
so gputopo would never be judged. This plugin is the one patch the gate applies to the ATF, and
it touches no test: every configuration value the ATF reads (atf.get_config, file or live)
reports gputopo's plugin under the stock name it replaces, and every value it writes
(atf.set_config_parameter) of a replaced stock plugin becomes gputopo's.

Which plugins stand in comes from the environment, set by contrib/slurm-testsuite/inner.sh:
GATE_SELECT (e.g. select/gputopo_cons_tres) and GATE_PRIORITY (e.g. priority/gputopo); unset or
empty for the stock side, where the plugin changes nothing.
"""

import os

# parameter (lower case) -> (stock value the tests require, environment variable naming the
# gputopo value standing in for it)
_STAND_INS = {
    "selecttype": ("select/cons_tres", "GATE_SELECT"),
    "prioritytype": ("priority/multifactor", "GATE_PRIORITY"),
}


def _stand_in(name):
    """(stock, gputopo) for a parameter gputopo replaces on this side, or None."""
    entry = _STAND_INS.get(str(name).lower())
    if entry is None:
        return None
    ours = os.environ.get(entry[1], "")
    return (entry[0], ours) if ours else None


def _patch(atf):
    get_config = atf.get_config
    set_config_parameter = atf.set_config_parameter

    def gate_get_config(*args, **kwargs):
        config = get_config(*args, **kwargs)
        for key in list(config):
            pair = _stand_in(key)
            if pair and str(config[key]).lower() == pair[1].lower():
                config[key] = pair[0]
        return config

    def gate_set_config_parameter(parameter_name, parameter_value, *args, **kwargs):
        pair = _stand_in(parameter_name)
        if pair and str(parameter_value).lower() == pair[0].lower():
            parameter_value = pair[1]
        return set_config_parameter(parameter_name, parameter_value, *args, **kwargs)

    # The ATF's own helpers (require_config_parameter, get_config_parameter, ...) look these
    # names up in the module at call time, so rebinding them covers every caller.
    atf.get_config = gate_get_config
    atf.set_config_parameter = gate_set_config_parameter


def pytest_configure(config):
    # conftest.py puts testsuite/python/lib on sys.path and imports atf; the gate's runner puts
    # it on PYTHONPATH too, so this is the same module object the tests use.
    import atf

    _patch(atf)
