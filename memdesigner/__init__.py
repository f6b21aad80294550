"""memdesigner: see how much memory a neural network needs, before running it.

    import memdesigner
    design = memdesigner.load_design("resources/examples/resnet18.json")
    report = memdesigner.estimate(design, mode="train", batch=32, optimizer="adam", device="a100-40gb")
    report.peak_bytes, report.to_dict()
"""

from memdesigner.engine.estimate import estimate, largest_batch
from memdesigner.engine.settings import Settings
from memdesigner.io.design_file import DesignFileError, load_design, save_design
from memdesigner.model.design import Design

__version__ = "0.1.0"

__all__ = ["Design", "Settings", "estimate", "largest_batch", "load_design", "save_design", "DesignFileError"]
