"""The interpreter: runs the IR of every level on the CPU, rounding like the target.

from affinec.interpreter import interpret
interpret(module, "conv", x, w, y)   # y is written in place
"""

from affinec.interpreter.interpreter import Interpreter, interpret
from affinec.interpreter.support import InterpreterError

__all__ = ["Interpreter", "InterpreterError", "interpret"]
