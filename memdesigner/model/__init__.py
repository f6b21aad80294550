"""The design graph, its analysis and the layer registry. Importing the package registers every
layer type (model/layers/, one module per family) before anything asks the registry, so that the
registry itself imports none of them."""

from memdesigner.model import layers  # noqa: F401  (registers every layer type)
