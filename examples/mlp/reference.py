import torch
import torch.nn as nn

# Small architecture (level 3): a three-layer perceptron, Linear -> ReLU -> Linear -> ReLU -> Linear.
batch_size = 2048
input_size = 4096
hidden1 = 4096
hidden2 = 2048
output_size = 1000


class Model(nn.Module):
    def __init__(self, input_size, hidden1, hidden2, output_size):
        super().__init__()
        self.fc1 = nn.Linear(input_size, hidden1)
        self.fc2 = nn.Linear(hidden1, hidden2)
        self.fc3 = nn.Linear(hidden2, output_size)

    def forward(self, x):
        x = torch.relu(self.fc1(x))
        x = torch.relu(self.fc2(x))
        return self.fc3(x)


def get_inputs():
    return [torch.randn(batch_size, input_size)]


def get_init_inputs():
    return [input_size, hidden1, hidden2, output_size]
