"""KdaSplit's decode step (T = 1) unfused in torch around fla's fused
recurrent kernel (`fla.ops.kda.fused_recurrent_kda`): short conv, F_B gate,
fla's gated delta rule, gated RMSNorm, cache writes; the formulas of spec
§3. Used to check agreement with fla and, in bench/, as fla's whole step.
Capturable: no host synchronisation (padding rows are masked, not dropped)."""

import torch
import torch.nn.functional as F


def unfused_step(args, heads, fused_recurrent_kda):
    (x, w, bias, conv, fa, beta, a_log, dt_bias, slots, state, out, gate, nw,
     lower_bound, scale, eps, fb) = args[:17]
    b = slots.shape[0]
    dim = heads * 128
    active = slots > 0
    s = slots.clamp(min=0).long()
    c = conv[s]  # [B, 3*dim, W]
    seq = torch.cat([c[:, :, :3].float(), x.float().unsqueeze(-1)], -1)
    taps = w.float().permute(0, 2, 1).reshape(3 * dim, 4)
    act = F.silu((seq * taps).sum(-1) + bias.float())
    q, k, v = act.view(b, 3, heads, 128).unbind(1)
    raw = (fa.float() @ fb.float().t()).bfloat16().float().view(b, heads, 128)
    arg = a_log.float().exp().view(1, heads, 1) * (raw + dt_bias.float().view(1, heads, 128))
    g = lower_bound * torch.sigmoid(arg)
    bt = torch.sigmoid(beta.float())
    h0 = state[s].transpose(-1, -2).contiguous()  # fla: [N, H, K, V]
    o, ht = fused_recurrent_kda(
        q.unsqueeze(1).contiguous(), k.unsqueeze(1).contiguous(), v.unsqueeze(1).contiguous(),
        g.unsqueeze(1).contiguous(), bt.unsqueeze(1).contiguous(),
        scale=scale, initial_state=h0, output_final_state=True, use_qk_l2norm_in_kernel=True,
    )
    o = o.squeeze(1).float()
    rstd = torch.rsqrt(o.pow(2).mean(-1, keepdim=True) + eps)
    y = o * rstd * nw.float() * torch.sigmoid(gate.float().view(b, heads, 128))
    y = torch.where(active.view(b, 1, 1), y, torch.zeros_like(y))
    out.copy_(y.view(b, dim).bfloat16())
    keep = active.view(b, 1, 1, 1)
    new_state = torch.where(keep, ht.transpose(-1, -2).float(), state[s])
    state.index_copy_(0, s, new_state)
    new_conv = c.clone()
    new_conv[:, :, 0:2] = c[:, :, 1:3]
    new_conv[:, :, 2] = x
    conv.index_copy_(0, s, torch.where(active.view(b, 1, 1), new_conv, c))
    return o
