"""What a value may hold, and how it is written, in every file the builder writes.

A value from a user (an option, an argument, an environment variable), a recipe or a site
file reaches a generated file by one of three doors, each with its module here:

- **checked** as a field of a fixed form, or as one line (`check`): a Slurm name, an
  `#SBATCH` line, a variable's name; refused in one line (RecipeError, exit 2) otherwise;
- **quoted** as text of the file's language, from which that language's reader gets it back:
  shell (`shell`), Lua and Tcl (`lua_tcl`), TOML (`toml`), and the lines of an Apptainer
  definition, which adds its own rules for labels, headers and build arguments (`apptainer`);
- **escaped** inside a comment (`check.comment`), so the comment keeps its one line.
"""
