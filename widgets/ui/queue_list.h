// QueueList: the run queue as a list (label, state, run id); a failed entry's tooltip is its
// stderr, so "why did it fail" is one hover away.
#pragma once

#include <QListWidget>

#include "widgets/ui/run_queue.h"

namespace lathe::ui {

class QueueList : public QListWidget {
  Q_OBJECT
 public:
  QueueList(RunQueue* queue, QWidget* parent = nullptr);
  void refresh();

 private:
  RunQueue* m_queue;
};

}  // namespace lathe::ui
