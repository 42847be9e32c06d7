"""Skills: what a watcher's hook sessions are taught (``skillId``), from ``skills/<id>/SKILL.md``.

Reading and validating the files stays in ``config/skills.py``, with the ``Skill`` record: the
project loader (``config/loader.py``) reads them in the same pass as sentinel.yaml and the watcher
files, so one ``ConfigError`` names every file's problems, a watcher's ``skillId`` is checked
against the skills found, and a reload swaps watchers and skills together; the loader is on the
config floor, which imports nothing above it. This package sits on the floor just above and holds
what the running service does with a loaded skill: ``injection.py`` picks the skill a session
starts with and writes it into the model's first message.
"""
