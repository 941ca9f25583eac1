-- A site's policy in job_submit.lua (JobSubmitPlugins=lua), as the session's test cluster runs it
-- (tests/e2e/conftest.py): a running job whose name starts with "fixed-size" may not change its nodes; others may.
-- Sites that forbid a running job's resize refuse `scontrol update JobId=J NodeList=...` this way.

function slurm_job_submit(job_desc, part_list, submit_uid)
   return slurm.SUCCESS
end

function slurm_job_modify(job_desc, job_rec, part_list, modify_uid)
   local name = job_rec.name or ""
   if job_desc.req_nodes ~= nil and string.sub(name, 1, 10) == "fixed-size" then
      slurm.log_user("this site does not let a running job change its nodes")
      return slurm.ERROR
   end
   return slurm.SUCCESS
end
