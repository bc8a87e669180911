"""Optimal placement of ML workloads on heterogeneous CPU + CIM / PIM machines."""
