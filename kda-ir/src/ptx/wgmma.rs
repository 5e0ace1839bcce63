//! Warpgroup MMA: `wgmma.fence`, `wgmma.mma_async` with the matrix
//! descriptors built from the operand buffers' tiles
//! ([`crate::wgmma::descriptor`]), `wgmma.commit_group`, `wgmma.wait_group`.

use crate::entities::{Buffer, Inst, Value};
use crate::kernel::ValueDef;
use crate::op::Op;
use crate::wgmma::{Desc, MmaTile, Swizzle};

use super::PtxError;
use super::emitter::{Bank, Emitter, Reg, brace};

impl Emitter<'_> {
    pub fn wgmma_fence(&mut self) -> Result<(), PtxError> {
        self.ins("wgmma.fence.sync.aligned");
        Ok(())
    }

    pub fn wgmma_commit(&mut self) -> Result<(), PtxError> {
        self.ins("wgmma.commit_group.sync.aligned");
        Ok(())
    }

    pub fn wgmma_wait(&mut self, n: u32) -> Result<(), PtxError> {
        self.ins(format!("wgmma.wait_group.sync.aligned {n}"));
        Ok(())
    }

    /// The descriptor of the slice of `b`'s tile at K column `k`, in a
    /// 64-bit register: the fixed fields as an immediate, or'ed with the
    /// start address `(addr & 0x3FFFF) >> 4`.
    fn wgmma_desc(&mut self, i: Inst, b: Buffer, k: Value) -> Result<Reg, PtxError> {
        let Some(tile) = self.k.buffers[b].tile else {
            return Err(self.err(i, format!("wgmma operand {b} declares no tile")));
        };
        let fixed = Desc {
            start: 0,
            ..crate::wgmma::descriptor(tile, 0, 0)
        }
        .encode();
        let off = self.layout.buffers[b];
        let smem = self
            .smem
            .expect("a kernel with buffers has a shared window");
        let kr = self.reg(k);
        let kr = self.narrow32(kr);
        // The slice's start within the tile (MmaTile::slice_start).
        let start = self.new_reg(Bank::B32);
        match tile.swizzle {
            Swizzle::None => self.ins(format!("shl.b32 {start}, {kr}, 4")),
            s => {
                let panel = s.span() / 2;
                let (p, within) = (self.new_reg(Bank::B32), self.new_reg(Bank::B32));
                self.ins(format!("shr.u32 {p}, {kr}, {}", panel.trailing_zeros()));
                self.ins(format!("and.b32 {within}, {kr}, {}", panel - 1));
                self.ins(format!("shl.b32 {within}, {within}, 1"));
                self.ins(format!(
                    "mad.lo.u32 {start}, {p}, {}, {within}",
                    tile.rows * s.span()
                ));
            }
        }
        self.ins(format!("add.u32 {start}, {start}, {smem}"));
        if off != 0 {
            self.ins(format!("add.u32 {start}, {start}, {off}"));
        }
        self.ins(format!("and.b32 {start}, {start}, {}", 0x3FFFF));
        self.ins(format!("shr.u32 {start}, {start}, 4"));
        let d = self.new_reg(Bank::B64);
        self.ins(format!("cvt.u64.u32 {d}, {start}"));
        self.ins(format!("or.b64 {d}, {d}, {fixed:#x}"));
        Ok(d)
    }

    pub fn wgmma(&mut self, i: Inst) -> Result<(), PtxError> {
        let d = &self.k.insts[i];
        let Op::Wgmma { a, b, n, scale_d } = d.op else {
            unreachable!("a wgmma")
        };
        // The tile and its descriptor's fixed fields, in human terms.
        let tile = |b: Buffer| {
            self.k.buffers[b].tile.map(|t: MmaTile| {
                format!(
                    "{t}: LBO {}, SBO {}, swizzle bits {}",
                    t.lbo(),
                    t.sbo(),
                    t.swizzle.mode_bits()
                )
            })
        };
        self.comment(&format!(
            "wgmma m64n{n}k16: A {a} ({}), B {b} ({})",
            tile(a).unwrap_or_default(),
            tile(b).unwrap_or_default()
        ));
        let da = self.wgmma_desc(i, a, d.args[0])?;
        let db = self.wgmma_desc(i, b, d.args[1])?;
        let mut acc = Vec::with_capacity(d.results.len());
        for (j, &r) in d.results.iter().enumerate() {
            if scale_d {
                let c = d.args[2 + j];
                let cr = self.reg(c);
                if self.dies_here(i, c) {
                    // The accumulator chains in place: no copy between the
                    // fence and the wgmma (ptxas would serialise).
                    self.alias(r, vec![cr]);
                    acc.push(cr);
                    continue;
                }
                let dr = self.def1(r);
                self.ins(format!("mov.f32 {dr}, {cr}"));
                acc.push(dr);
            } else {
                acc.push(self.def1(r));
            }
        }
        let p = self.new_reg(Bank::Pred);
        self.ins(format!("setp.ne.b32 {p}, {}, 0", scale_d as u32));
        self.ins(format!(
            "wgmma.mma_async.sync.aligned.m64n{n}k16.f32.bf16.bf16 {}, {da}, {db}, {p}, 1, 1, 0, 0",
            brace(&acc)
        ));
        Ok(())
    }

    /// Whether `v`'s register may become the result's: `v` is used only by
    /// `i`, and defined in `i`'s region (a result there or one of its
    /// parameters), so no later iteration or use reads it again.
    fn dies_here(&self, i: Inst, v: Value) -> bool {
        let k = self.k;
        let uses: usize = k
            .insts
            .iter()
            .map(|(_, d)| d.args.iter().filter(|&&a| a == v).count())
            .sum();
        if uses != 1 {
            return false;
        }
        let Some((here, _)) = k.regions.iter().find(|(_, r)| r.insts.contains(&i)) else {
            return false;
        };
        match k.values[v].def {
            ValueDef::Param(r, _) => r == here,
            ValueDef::Result(j, _) => k.regions[here].insts.contains(&j),
        }
    }
}
