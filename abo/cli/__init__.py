"""The ``abo`` command: ``run`` a study file, ``demo``, ``serve``, and commands that read,
plot, analyse, import and export a study on a storage or a service."""
