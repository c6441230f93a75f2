// QueueList (see queue_list.h).
#include "widgets/ui/queue_list.h"

namespace lathe::ui {

QueueList::QueueList(RunQueue* queue, QWidget* parent) : QListWidget(parent), m_queue(queue) {
  setObjectName("queueList");
  connect(queue, &RunQueue::changed, this, &QueueList::refresh);
  refresh();
}

void QueueList::refresh() {
  clear();
  for (const QueuedRun& e : m_queue->entries()) {
    QString text = QString("%1  [%2]").arg(e.label, stateName(e.state));
    if (!e.runId.isEmpty())
      text += "  " + e.runId;
    if (e.state == QueuedRun::State::failed) {
      text += QString("  exit %1").arg(e.exitCode);
      // The reason, visible without hovering: lathe-cli's last non-empty stderr line.
      const QStringList lines = e.stderrTail.split('\n', Qt::SkipEmptyParts);
      if (!lines.isEmpty())
        text += "  —  " + lines.last().trimmed().left(300);
    }
    auto* item = new QListWidgetItem(text, this);
    if (e.state == QueuedRun::State::failed) {
      item->setForeground(QColor(183, 28, 28));
      item->setToolTip(e.stderrTail.right(3000));
    } else if (e.state == QueuedRun::State::running) {
      item->setForeground(QColor(21, 101, 192));
    }
  }
  if (count() == 0)
    addItem("Queue empty: Run queues the designer's experiment, Sweep queues one run per value.");
}

}  // namespace lathe::ui
