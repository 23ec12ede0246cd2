"""simdev: a simulated accelerator for TensorFlow, as a PluggableDevice.

Installing the wheel puts ``libsimdev.so`` into
``site-packages/tensorflow-plugins/``; ``import tensorflow`` loads it and the
device appears as ``/device:SIMDEV:0``. This package adds nothing to that
mechanism: it only tells where the library is and what TensorFlow reports
about the devices. Importing it does not import TensorFlow.
"""

import os as _os

__version__ = "0.1.0"

DEVICE_TYPE = "SIMDEV"

# The settings the plugin reads once, when TensorFlow loads it. Invalid
# values make the load fail (TensorFlow then aborts with the message).
SETTINGS = {
    "SIMDEV_DEVICE_COUNT": "number of simulated devices, 1..16 (default 1)",
    "SIMDEV_MEMORY_MB": "memory region per device in MiB, 1..1048576 (default 2048)",
    "SIMDEV_SYNC": "1: kernel launches run before their compute function "
                   "returns, for debugging (default 0)",
    "SIMDEV_UNSAFE_EARLY_COMPLETION": "1: the naive design, wrong on purpose; "
                                      "for the hazard tests only (default 0)",
}


def library_path():
    """Absolute path of the installed libsimdev.so."""
    here = _os.path.dirname(_os.path.abspath(__file__))
    path = _os.path.join(_os.path.dirname(here), "tensorflow-plugins", "libsimdev.so")
    if not _os.path.exists(path):
        raise FileNotFoundError(
            "libsimdev.so is not installed next to this package (expected %s)" % path)
    return path


def device_info():
    """What TensorFlow reports for each SIMDEV device.

    Returns a list of dicts: name, memory info (bytes in use and peak, from
    TensorFlow's allocator over the device) and the settings in force.
    Imports TensorFlow (which loads the plugin).
    """
    import tensorflow as tf

    out = []
    for dev in tf.config.list_physical_devices(DEVICE_TYPE):
        index = dev.name.rsplit(":", 1)[1]
        mem = tf.config.experimental.get_memory_info("%s:%s" % (DEVICE_TYPE, index))
        out.append({
            "name": dev.name,
            "device_type": dev.device_type,
            "memory_in_use": mem["current"],
            "memory_peak": mem["peak"],
            "settings": {k: _os.environ.get(k) for k in SETTINGS},
        })
    return out
