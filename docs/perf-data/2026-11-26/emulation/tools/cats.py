import sys, subprocess, re, collections
CATS = [
 ("translated guest code (JIT)", lambda s,d: d.startswith("[JIT]")),
 ("TB lookup: jmp cache + hash table", lambda s,d: s in ("qht_lookup_custom","helper_lookup_tb_ptr","tb_htable_lookup","tb_lookup_cmp","get_page_addr_code_hostp","tb_jmp_cache_set")),
 ("cpu_exec loop (TB exits, interrupts check)", lambda s,d: s in ("cpu_exec","cpu_tb_exec","cpu_handle_interrupt","x86_cpu_exec_interrupt","cpu_loop_exit","cpu_loop_exit_noexc","__sigsetjmp","__longjmp","____longjmp_chk","__libc_siglongjmp","siglongjmp","x86_cpu_pending_interrupt","cpu_exec_enter","x86_cpu_exec_enter","x86_cpu_exec_exit","do_pause","helper_pause","cpu_loop_exit_restore","_longjmp_unwind","longjmp")),
 ("softmmu TLB miss: victim TLB, page walk, fill", lambda s,d: s in ("probe_access_internal","tlb_set_page_full","mmu_translate","probe_access_full","x86_cpu_tlb_fill","ptw_translate","address_space_translate_internal","qemu_ram_block_from_host","helper_le_ldq_mmu","helper_le_stq_mmu","helper_le_ldul_mmu","helper_le_stl_mmu","victim_tlb_hit","address_space_translate_for_iotlb","cpu_physical_memory_get_dirty.constprop.0","qemu_ram_addr_from_host_nofail","get_ptr_rcu_reader","get_pg_mode","full_le_ldul_mmu","full_le_lduw_mmu","full_ldub_mmu","memory_region_get_ram_ptr","cpu_asidx_from_attrs","memory_region_get_ram_addr","qemu_map_ram_ptr","tlb_set_page_with_attrs","get_physical_address","helper_ldub_mmu","helper_stb_mmu","helper_le_lduw_mmu","helper_le_stw_mmu","full_le_ldq_mmu","tlb_fill","store_helper","load_helper","probe_access","probe_access_flags","cpu_ldq_le_data_ra","cpu_stq_le_data_ra","cpu_ldl_le_data_ra","cpu_stl_le_data_ra","cpu_ldq_le_mmuidx_ra","cpu_ldl_le_mmuidx_ra","cpu_stq_le_mmuidx_ra","cpu_stl_le_mmuidx_ra","x86_ldq_phys","x86_ldl_phys","x86_stl_phys_notdirty","ptw_ldq","ptw_ldl","ptw_setl","ptw_setl_slow","qemu_plugin_vcpu_mem_cb","tlb_add_large_page","address_space_to_flatview","flatview_translate","iotlb_to_section","memory_region_section_get_iotlb","notdirty_write","cpu_physical_memory_set_dirty_range","tlb_entry_is_empty")),
 ("softmmu TLB flush + jmp-cache clear", lambda s,d: s in ("tcg_flush_jmp_cache","tlb_flush_vtlb_page_mask_locked","tlb_flush_by_mmuidx_async_work","tlb_flush_one_mmuidx_locked","tlb_mmu_resize_locked","tlb_flush_page_by_mmuidx_async_0","tlb_flush_page_locked","tlb_flush_range_locked","tb_jmp_cache_clear_page","cpu_x86_update_cr3","helper_write_crN","find_next_bit") or (s.startswith("__memset") and True)),
 ("code generation / invalidation", lambda s,d: s.startswith(("tcg_","liveness_","tb_gen_code","gen_intermediate_code","disas_insn","translator_","tb_invalidate","tb_phys_invalidate","do_tb_phys_invalidate","tb_link_page","page_","la_","temp_","reachable_code_pass","tcg_optimize","fold_","gen_","tb_alloc","tb_page_","tb_remove"))),
 ("host kernel", lambda s,d: d=="[kernel.kallsyms]"),
 ("vCPU thread outer loop (re-entering cpu_exec after PAUSE/HLT exits)", lambda s,d: s in ("mttcg_cpu_thread_fn","cpu_exec_start","cpu_exec_end","qemu_wait_io_event","qemu_wait_io_event_common","tcg_cpus_exec","process_queued_cpu_work","type_is_ancestor","object_class_dynamic_cast_assert","object_class_dynamic_cast","object_dynamic_cast_assert","g_hash_table_lookup","g_str_hash","qemu_mutex_lock_impl","qemu_mutex_unlock_impl","qemu_cond_wait_impl","qemu_cond_broadcast","cpu_thread_is_idle","qemu_mutex_lock_iothread_impl","qemu_mutex_unlock_iothread","icount_enabled","replay_exception","replay_has_exception","replay_interrupt","replay_has_interrupt","cpu_handle_halt","tcg_cpus_destroy","object_get_class","object_dynamic_cast","type_get_by_name","g_str_equal","tcg_cpu_exec","qatomic_mb_set","qemu_event_reset","cpu_exec_step_atomic","rcu_read_lock","rcu_read_unlock","qemu_plugin_vcpu_idle_cb","qemu_plugin_vcpu_resume_cb") or s.startswith(("pthread_mutex","__GI___pthread_mutex","__pthread_mutex","pthread_cond","__GI___lll","__lll_","__futex","qemu_futex"))),
]
def run(path, trange):
    cmd=["perf","report","-i",path,"--no-children","--sort","dso,sym","-g","none","-q","--stdio","-F","period,dso,sym"]
    if trange: cmd += ["--time", trange]
    out=subprocess.run(cmd,capture_output=True,text=True).stdout
    tot=0; cat=collections.Counter(); other=collections.Counter()
    for line in out.splitlines():
        m=re.match(r"\s*(\d+)\s+(\S.*?)\s+\[[.k]\]\s+(.*)$",line)
        if not m: continue
        p=int(m.group(1)); d=m.group(2).strip(); s=m.group(3).strip()
        tot+=p
        for name,f in CATS:
            if f(s,d): cat[name]+=p; break
        else: other[s]+=p
    return tot,cat,other
cols=[]
for arg in sys.argv[1:]:
    path,ns,tr=arg.split("@")
    tot,cat,other=run(path,tr); cols.append((path.split("/")[-2],float(ns),tot,cat,other))
print("| category | "+" | ".join(f"{c[0]} % | µs/op" for c in cols)+" |")
for name,_ in CATS+[("other helpers and QEMU code",None)]:
    row=[]
    for _,ns,tot,cat,other in cols:
        v=cat[name] if _ is not None or name in cat else sum(other.values())
        if name=="other helpers and QEMU code": v=sum(other.values())
        row.append(f"{100*v/tot:.1f} | {ns*v/tot/1000:.2f}")
    print(f"| {name} | "+" | ".join(row)+" |")
for c in cols:
    print(c[0],"top other:",", ".join(f"{k} {100*v/c[2]:.1f}%" for k,v in c[4].most_common(12)))
