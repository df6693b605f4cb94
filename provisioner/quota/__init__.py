"""Quota: what each Team and Department is promised per NodePool, what it uses, and which gated pods
may run where (admission, over-quota borrowing shared by weight, reclaim). Pure: takes a snapshot and
returns values; the admission controller acts on them.

- `book`: the Teams, Departments and pools as one lookup (whose pod, which entry, which pool order).
- `usage`: use per team, department and pool, counted from a snapshot.
- `admission`: the decision for the gated pods of one pass, with reasons that carry numbers
  (`decisions`: what it decides, `AdmissionPlan`).
- `work`: one pass's running count and its checks (quota, department cap, pool room, in-team preemption).
- `borrowing`: the borrowers served by weight, and the reclaims among borrowers (fair share, owners).
- `reclaim`: which borrowed pods to evict, just enough, for an owner coming back.
- `status`: the Team and Department `status` documents.
- `gate`: which new pods the admission webhook gates (a JSON patch).
"""
