"""PyTorch hooks: ``watch(model, optimizer)`` records each optimizer step without changing the loop.

Importing this package imports torch; ``import stepwatch`` alone never does.
"""

from ._control import Control, StopTraining, control
from ._device import Cuda, Device, Host
from ._profile import Profile, profile
from ._watch import Watcher, watch

__all__ = [
    "Control",
    "Cuda",
    "Device",
    "Host",
    "Profile",
    "StopTraining",
    "Watcher",
    "control",
    "profile",
    "watch",
]
