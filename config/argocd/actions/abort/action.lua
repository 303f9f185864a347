-- Argo CD action "abort" for nvidia.com/DynamoGraphDeployment: what
-- "kubectl dgd rollout abort" writes, the nvidia.com/rollout-abort annotation
-- "<updateRevisionNumber>/<attempt>" (attempt at least 1), so it acts on this attempt only.
local rev = obj.status.updateRevisionNumber or 0
local attempt = obj.status.rollingUpdate.attempt or 0
if attempt < 1 then
  attempt = 1
end
if obj.metadata.annotations == nil then
  obj.metadata.annotations = {}
end
obj.metadata.annotations["nvidia.com/rollout-abort"] = rev .. "/" .. attempt
return obj
