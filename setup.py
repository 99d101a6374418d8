"""Ships ``phasescope_lm_eval.pth`` at the top of the wheel, so ``lm_eval --model
phasescope-ensemble`` finds phasescope's model (``phasescope.lm_eval_plugin``). Everything
else is in pyproject.toml."""

from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

PTH = "phasescope_lm_eval.pth"


class BuildWithPth(build_py):
    def run(self):
        super().run()
        self.copy_file(PTH, str(Path(self.build_lib) / PTH))

    def get_outputs(self, include_bytecode=True):
        return [*super().get_outputs(include_bytecode), str(Path(self.build_lib) / PTH)]


setup(cmdclass={"build_py": BuildWithPth})
