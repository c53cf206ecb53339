"""The agents: Planner, Coder, Debugger (LLM roles) and the deterministic Analyzer.

Import the classes from their modules (``kernelskill.agents.planner`` …); this package imports
nothing heavy so ``kernelskill.trajectory`` can use ``agents.parsing`` freely.
"""
