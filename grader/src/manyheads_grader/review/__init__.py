"""What is checked before and after a notebook runs: the checked stage (``checking``: ``repair`` against the
release, ``versions``: which release it was written for), the evidence of the own-work rule (``own_work``) and the
reviewed stage (``reviewing``: the ``flags`` a human looks at, integrity flags, no points).
"""
