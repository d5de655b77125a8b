"""docs/amaze.md's maze written out in plain Python, with nothing taken from envs/: the reference the tests hold the
env's step, view, scripted walks and shortest paths to. Positions are (x, y); `walls[y, x]` is True on a wall."""

import numpy as np

TURN_LEFT, TURN_RIGHT, FORWARD = 0, 1, 2
"""The actions that change anything; the other four change nothing."""
FACING = [(1, 0), (0, 1), (-1, 0), (0, -1)]
"""The directions: 0 = +x (right), 1 = +y (down), 2 = -x (left), 3 = -y (up)."""


def python_step(walls, goal, position, direction: int, action: int) -> tuple[tuple[int, int], int, bool]:
    """(position, direction, reached the goal) after one action: turns change the direction; forward into the goal
    reaches it with the agent staying put; forward onto a free cell inside the grid moves; anything else keeps the
    cell."""
    height, width = walls.shape
    if action == TURN_LEFT:
        return position, (direction - 1) % 4, False
    if action == TURN_RIGHT:
        return position, (direction + 1) % 4, False
    if action == FORWARD:
        ahead = (position[0] + FACING[direction][0], position[1] + FACING[direction][1])
        if ahead == goal:
            return position, direction, True
        if 0 <= ahead[0] < width and 0 <= ahead[1] < height and not walls[ahead[1], ahead[0]]:
            return ahead, direction, False
    return position, direction, False


def goal_reward(time: int, max_steps: int) -> float:
    """The return of reaching the goal at step `time` (counted from 1)."""
    return 1 - 0.9 * time / max_steps


def python_view(walls, goal, position, direction: int, size: int) -> np.ndarray:
    """The uint8 egocentric view with see_agent: `image[r, c]` is the cell `size-1-r` ahead and `c - size//2` to the
    right; outside the grid reads as wall; the agent's own cell is (10, 0, direction)."""
    height, width = walls.shape
    (ahead_x, ahead_y), (right_x, right_y) = FACING[direction], FACING[(direction + 1) % 4]
    image = np.zeros((size, size, 3), np.uint8)
    for row in range(size):
        for column in range(size):
            ahead, right = size - 1 - row, column - size // 2
            x, y = position[0] + ahead * ahead_x + right * right_x, position[1] + ahead * ahead_y + right * right_y
            if (x, y) == goal:
                image[row, column] = (8, 1, 0)
            elif not (0 <= x < width and 0 <= y < height) or walls[y, x]:
                image[row, column] = (2, 5, 0)
            else:
                image[row, column] = (1, 0, 0)
    image[size - 1, size // 2] = (10, 0, direction)
    return image
