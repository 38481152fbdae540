"""Admission: what may refuse, or change, what the service admits, before anything is stored. The guards in their
declared order (argument schemas, the stop switch, practice, delegation, typed confirmation, receipts) and the flood
caps each new approval is counted against."""
