"""What this machine has and keeps, shared by every stage: the user's cache, host facts, free
space, the Apptainer toolbox, built image files (their locks and labels) and step progress."""
