"""Shared test fixtures."""

import pytest
import torch


@pytest.fixture
def one_thread():
    """Run with one torch thread: on a small shared CPU several intra-op threads mostly wait on each other."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
