"""AMaze, the environment every method shares: see envs/maze.py for the API."""
