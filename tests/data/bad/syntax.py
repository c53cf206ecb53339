import torch
batch = 4
def get_inputs(:
    return []
