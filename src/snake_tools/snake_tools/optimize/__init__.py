"""Helpers of ``snake optimize``: the study's HTML report (:mod:`snake_tools.optimize.report`)."""
