"""One step of a small GAN on 2-D points, the generator trained with the original minimax loss log(1 - D(G(z)))."""
import torch
import torch.nn.functional as F
from torch import nn


def mlp(n_in, n_out, hidden=32):
    return nn.Sequential(nn.Linear(n_in, hidden), nn.LeakyReLU(0.2), nn.Linear(hidden, n_out))


def train():
    gen, disc = mlp(8, 2), mlp(2, 1)
    opt_g = torch.optim.Adam(gen.parameters(), lr=2e-4, betas=(0.5, 0.999))
    opt_d = torch.optim.Adam(disc.parameters(), lr=2e-4, betas=(0.5, 0.999))
    real = torch.randn(64, 2) * 0.5 + torch.tensor([2.0, -1.0])
    z = torch.randn(64, 8)

    # discriminator: real -> 1, fake -> 0
    fake = gen(z)
    d_real, d_fake = disc(real), disc(fake.detach())
    loss_d = (F.binary_cross_entropy_with_logits(d_real, torch.ones_like(d_real))
              + F.binary_cross_entropy_with_logits(d_fake, torch.zeros_like(d_fake)))
    opt_d.zero_grad()
    loss_d.backward()
    opt_d.step()

    # generator: minimise log(1 - D(G(z)))
    p_fake = torch.sigmoid(disc(fake))
    loss_g = torch.log(1 - p_fake).mean()  # vulnerable
    opt_g.zero_grad()
    loss_g.backward()
    opt_g.step()
    return loss_d.item() + loss_g.item()
