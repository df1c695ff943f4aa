"""Running students' notebooks: the executed stage (``executing``) and what it stands on.

``executing`` (the stage: chunks of a queue, or the cluster) -> ``worker`` (a course copy that autogrades chunks) and
``cluster`` (chunks on dask) -> ``kernel_fork`` (kernels forked from a template), ``kernel_client`` (nbgrader's
kernel manager without fixed waits), ``budget`` (a time budget per notebook), ``sandbox`` (bubblewrap),
``processes`` (no student process outlives grading); ``preflight`` grades the release's own answers first, on the
same machinery.
"""
